package fs

import (
	"sync"

	"github.com/ckptfs/ckptfs/chain"
)

// The kernel's pages of a view file. A view file's content is a function
// of the version it shows, so pages cached from one open serve the next
// one (FOPEN_KEEP_CACHE) while the file shows the same version: a second
// read of a view (an evaluation loop, ranks loading one shard) is a page
// cache read, not a decode of its chain. An open keeps the pages only if
// every page the kernel may hold came from that version:
//   - the version is the one last opened;
//   - no handle of another version was open meanwhile (its reads, after an
//     open that dropped the pages, would fill them with its bytes again);
//   - the tier has not re-coded the content since (TierBusy: the version
//     keeps its number and changes its bytes).
//
// The record of a view inode goes when the kernel forgets the inode, and
// its pages with it.
type viewPages struct {
	mu    sync.Mutex
	files map[uint64]*viewPagesOf // by view inode number
}

type viewPagesOf struct {
	version chain.VersionID // the version the pages are of
	open    int             // handles open
	mixed   bool            // pages of another version may be cached
}

// opened records a handle of view inode vino showing version v and
// reports whether the kernel may keep the pages it has.
func (vp *viewPages) opened(vino uint64, v chain.VersionID) (keep bool) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	if vp.files == nil {
		vp.files = map[uint64]*viewPagesOf{}
	}
	st := vp.files[vino]
	switch {
	case st == nil:
		st = &viewPagesOf{version: v}
		vp.files[vino] = st
	case st.version == v && !st.mixed:
		keep = true
	case st.open == 0:
		// This open drops every page: what follows is v's alone.
		st.version, st.mixed = v, false
	default:
		// Handles of st.version still read, and may fill pages again.
		st.version, st.mixed = v, true
	}
	st.open++
	return keep
}

// closed records the release of a handle of vino.
func (vp *viewPages) closed(vino uint64) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	if st := vp.files[vino]; st != nil && st.open > 0 {
		st.open--
	}
}

// changed notes that the content of ino's versions may have changed under
// their numbers: the next open of each view of it drops the pages.
func (vp *viewPages) changed(ino chain.Ino) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	for _, p := range chain.Precisions {
		if st := vp.files[viewIno(ino, p)]; st != nil {
			st.mixed = true
		}
	}
}

// forget drops the record of vino, whose pages the kernel dropped with it.
func (vp *viewPages) forget(vino uint64) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	if st := vp.files[vino]; st != nil && st.open == 0 {
		delete(vp.files, vino)
	}
}

package fs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/fs/save"
)

// openFile is the state one inode's open handles share: the staging file
// of the content being written (stagingfile.go), and a reader of the committed
// version.
type openFile struct {
	mu       sync.Mutex
	handles  int
	writable int // handles open for writing (under openTable.mu)
	reader   *chain.Reader
	// stage is the staging file of the uncommitted content: set from the
	// first open for writing until the commit after the last writer's
	// release lands. staged mirrors it for stat and listings, which read
	// it without mu (a commit holds mu while it encodes).
	stage  *stagedFile
	staged atomic.Pointer[stagedFile]
	// save is where the save of the staged content is (fs/save): changed,
	// queued, committing, kept for a later try, and the failure to report.
	save save.State
	// cached and passthrough count the handles of each I/O mode: the kernel
	// serves an inode either through its page cache (requests to us) or
	// from one backing file, never both at once (stagingfile.go).
	cached, passthrough int
	// atimeChecked is when a read last checked the atime (Node.accessed),
	// in Unix nanoseconds: reads check it at most once a second, the first
	// after an open that found it stale (readerOpened) at once.
	atimeChecked atomic.Int64
}

// atimeCheckDue reports whether a read at now should check the atime: a
// second after the last check, so that a stream of reads costs no
// metadata read each.
func (of *openFile) atimeCheckDue(now int64) bool {
	last := of.atimeChecked.Load()
	return now-last >= int64(time.Second) && of.atimeChecked.CompareAndSwap(last, now)
}

// addWritable counts a handle of of that may write.
func (t *openTable) addWritable(of *openFile) {
	t.mu.Lock()
	of.writable++
	t.mu.Unlock()
}

// writers is the number of handles of of open for writing.
func (t *openTable) writers(of *openFile) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return of.writable
}

// openTable holds the openFile of every inode with open handles, and the
// inodes the kernel holds references to (looked up and not yet forgotten):
// an unlinked inode must live while either remains, as on any filesystem,
// or an fstat between the kernel's lookup and open would find it gone.
type openTable struct {
	mu    sync.Mutex
	files map[chain.Ino]*openFile
	known map[chain.Ino]bool
}

func newOpenTable() *openTable {
	return &openTable{files: map[chain.Ino]*openFile{}, known: map[chain.Ino]bool{}}
}

// remember notes that the kernel references ino.
func (t *openTable) remember(ino chain.Ino) {
	t.mu.Lock()
	t.known[ino] = true
	t.mu.Unlock()
}

// forget notes that the kernel dropped ino; it reports whether the inode is
// now unused (no handles either).
func (t *openTable) forget(ino chain.Ino) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.known, ino)
	return t.files[ino] == nil
}

// inUse reports whether ino is open or referenced by the kernel.
func (t *openTable) inUse(ino chain.Ino) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[ino] != nil || t.known[ino]
}

// acquire returns the inode's shared state, counting one more handle.
func (t *openTable) acquire(ino chain.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[ino]
	if of == nil {
		of = &openFile{}
		t.files[ino] = of
	}
	of.handles++
	return of
}

// release drops a handle of of, the state of ino. When it was the last
// handle open for writing, lastWriter runs (with of.mu held), told how many
// handles stay open, and reports whether it started a commit, which then
// holds the state (and the inode) until it lands, as a handle would: the
// hold is counted with this release, under the same lock, so the state
// never leaves the table between the two, where a concurrent open would
// make a second one for the inode. When it was the inode's last handle, the
// state leaves the table, so a concurrent open finds either the staged
// content or the committed one, never a gap. It reports whether the inode
// is now unused (no handles, not referenced by the kernel).
func (t *openTable) release(ino chain.Ino, of *openFile, writable bool, lastWriter func(of *openFile, others int) bool) bool {
	t.mu.Lock()
	of.handles--
	if writable {
		of.writable--
	}
	wroteLast := writable && of.writable == 0
	if wroteLast {
		of.handles++ // the commit's hold, if lastWriter starts one
	}
	t.mu.Unlock()
	if wroteLast {
		of.mu.Lock()
		// A writer that opened since the count above shares the staging
		// file (it took of.mu first and found it open): its release
		// commits, as this one would have committed under it.
		t.mu.Lock()
		last, others := of.writable == 0, of.handles-1
		t.mu.Unlock()
		held := last && lastWriter(of, others)
		of.mu.Unlock()
		if !held {
			t.mu.Lock()
			of.handles--
			t.mu.Unlock()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if of.handles > 0 || t.files[ino] != of { // still open, or reopened meanwhile
		return false
	}
	delete(t.files, ino)
	return !t.known[ino]
}

// others is the number of handles of of besides the one its caller holds.
func (t *openTable) others(of *openFile) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return of.handles - 1
}

// get returns the inode's shared state, or nil if it has no open handles.
func (t *openTable) get(ino chain.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[ino]
}

// setStage sets the staging file of of (mu held), counting the files
// staged in f.
func (of *openFile) setStage(sf *stagedFile, f *FS) {
	if of.stage != sf {
		if of.stage != nil {
			defer f.stagedFiles(of.stage, -1)
		}
		if sf != nil {
			f.stagedFiles(sf, 1)
		}
	}
	of.stage = sf
	of.staged.Store(sf)
}

// endStage ends sf's time as of's staging file (mu held): of has no staged
// content left, and the file is retired.
func (of *openFile) endStage(f *FS, ino chain.Ino, sf *stagedFile) {
	of.setStage(nil, f)
	of.save.Ended()
	f.retire(ino, sf)
}

// closedUnreleased reports whether a file was closed by its last writer
// and its release has not reached us yet (its commit has not started).
func (t *openTable) closedUnreleased() bool {
	for _, of := range t.snapshot() {
		if of.closedUnreleased() {
			return true
		}
	}
	return false
}

// snapshot returns the shared state of every open inode.
func (t *openTable) snapshot() []*openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	files := make([]*openFile, 0, len(t.files))
	for _, of := range t.files {
		files = append(files, of)
	}
	return files
}

package fs

import (
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// What a replicating store tells readers of its bucket (chain/remote,
// "Consistent cuts"): which closed files are not in the store yet, and
// which are being written.

// noteClosed records the close of the last writer of sf: its content is
// closed from now, and stays uncommitted until its commit lands.
func (sf *stagedFile) noteClosed() { sf.closedAt.CompareAndSwap(0, time.Now().UnixNano()) }

// noteReopened records that a writer opened sf again. Every daemon-written
// write calls it: a load, and a store only after a close.
func (sf *stagedFile) noteReopened() {
	if sf.closedAt.Load() != 0 {
		sf.closedAt.Store(0)
	}
}

// Cut returns the earliest close (Unix ns) of a file whose commit has not
// landed (0: none), and the files being written. Every file closed before
// the moment Cut is called, and not reported by it, is in the store.
func (f *FS) Cut() (oldestClose int64, writing []chain.Ino) {
	f.open.mu.Lock()
	defer f.open.mu.Unlock()
	for ino, of := range f.open.files {
		sf := of.staged.Load()
		if sf == nil {
			continue
		}
		if c := sf.closedAt.Load(); c != 0 {
			if oldestClose == 0 || c < oldestClose {
				oldestClose = c
			}
		} else {
			writing = append(writing, ino)
		}
	}
	return oldestClose, writing
}

// InUse reports whether an inode is open or known to the kernel: a
// replica that drops its name keeps it until forgotten.
func (f *FS) InUse(ino chain.Ino) bool { return f.open.inUse(ino) }

// TierBusy reports whether a mount's tier must leave ino's content as it
// is for now: a handle is open (its reader may have read part of it), or a
// copy of the content serves readers (a read copy, or a save's staging
// file kept after its commit). If not, the kernel's pages of ino are
// dropped at its next open: the tier may change its bytes. The store asks
// inside the transaction that swaps a version in, after marking it, so
// an open after this answer reads the version as the swap leaves it.
func (f *FS) TierBusy(ino chain.Ino) bool {
	f.open.mu.Lock()
	open := f.open.files[ino] != nil
	f.open.mu.Unlock()
	if open {
		return true
	}
	f.backingMu.Lock()
	b := f.backings[ino]
	copied := b != nil && !b.sf.gone
	f.backingMu.Unlock()
	if copied {
		return true
	}
	f.markStale(ino)
	return false
}

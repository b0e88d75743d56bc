package chain

import (
	"time"

	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// shadowCommit tells the wear accounts what a plain filesystem would write
// for this commit.
func (tx *txn) shadowCommit(ino meta.Ino, c wear.Change, newSize int64) error {
	if tx.s.wear == nil {
		return nil
	}
	return tx.s.wear.Commit(tx.mtx, ino, c, newSize)
}

// shadowRelease frees an inode's shadow pages (unlink of the last name).
func (tx *txn) shadowRelease(ino meta.Ino) error {
	if tx.s.wear == nil {
		return nil
	}
	return tx.s.wear.Release(tx.mtx, ino)
}

// flusherPeriod is how often the shadow's page cache model writes back
// expired files: the kernel's dirty_writeback_centisecs default.
const flusherPeriod = 5 * time.Second

// ModelShadowWriteBack makes the shadow charge a file's pages when a plain
// filesystem's page cache would write them back (wear.DeferWriteBack: the
// dirty expiry, the background limit of limitBytes, fsync, unmount) rather
// than at every commit, and runs the flusher until Close. A mount models
// its host this way; replay does not. Call it before the first commit.
func (s *Store) ModelShadowWriteBack(expire time.Duration, limitBytes int64) {
	if s.wear == nil || s.stopFlusher != nil {
		return
	}
	s.wear.DeferWriteBack(expire, limitBytes, s.now)
	stop := make(chan struct{})
	s.stopFlusher = stop
	go func() {
		t := time.NewTicker(flusherPeriod)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.wear.WriteBackDue()
			case <-stop:
				return
			}
		}
	}()
}

// WriteBackShadow charges the shadow ino's pages still in the modelled
// page cache: a plain filesystem writes them at fsync of the file.
func (s *Store) WriteBackShadow(ino meta.Ino) {
	if s.wear != nil {
		s.wear.WriteBackFile(ino)
	}
}

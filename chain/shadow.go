package chain

import (
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

// filePageSize is the unit of a file's dirty pages: the plain filesystem's
// block, which the shadow counts in (the backend's block without wear
// accounts).
func (s *Store) filePageSize() int64 {
	if s.wear != nil {
		return s.wear.PageSize()
	}
	return int64(s.blockSize)
}

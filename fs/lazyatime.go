package fs

import (
	"github.com/ckptfs/ckptfs/chain"
)

// Access times that reads record are kept in memory and written in one
// metadata transaction at unmount (FlushAtimes), as the lazytime mount
// option does on Linux: a synced transaction per file read back after each
// save would cost more flash pages than the save's own records. stat shows
// them at once; a daemon killed before the unmount loses them, as a power
// loss does under lazytime.

// pendingAtime is the access time recorded for ino and not yet written.
func (f *FS) pendingAtime(ino chain.Ino) (int64, bool) {
	v, ok := f.atimes.Load(ino)
	if !ok {
		return 0, false
	}
	return v.(int64), true
}

// atimeOf is the access time stat shows: the store's or a later pending one.
func (f *FS) atimeOf(in *chain.Inode) int64 {
	if at, ok := f.pendingAtime(in.Ino); ok && at > in.Atime {
		return at
	}
	return in.Atime
}

// FlushAtimes writes the pending access times in one transaction (inodes
// deleted since are skipped).
func (f *FS) FlushAtimes() error {
	batch := map[chain.Ino]int64{}
	f.atimes.Range(func(k, v any) bool {
		batch[k.(chain.Ino)] = v.(int64)
		return true
	})
	if len(batch) == 0 {
		return nil
	}
	if err := f.names.SetAtimes(batch); err != nil {
		return err
	}
	for ino, at := range batch {
		f.atimes.CompareAndDelete(ino, at)
	}
	return nil
}

package wear

import (
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim/pagecache"
	"github.com/sirupsen/logrus"
)

// The plain filesystem's page cache (nandsim/pagecache). A plain
// filesystem does not write a file's pages at close: they stay dirty in
// the page cache until the host writes them back. A file deleted or cut
// before then is never written: a last.pt rewritten every few seconds
// costs the disk one copy when it settles, not one per save. With
// DeferWriteBack the shadow follows that model; without it (replay, the
// paper's offline figures) every commit is charged at once.

// writeBack holds the shadow pages committed but not yet written back,
// each inode's as one file of the model.
type writeBack struct {
	mu    sync.Mutex
	cache *pagecache.Cache[meta.Ino]
}

// DeferWriteBack makes the shadow charge a file's committed pages only
// when a plain filesystem's page cache would write them back: after expire
// dirty, when more than limitBytes are dirty (oldest files first), at
// WriteBackFile (fsync) or WriteBackAll (sync, unmount). now is the clock
// (time.Now outside tests). Call it before the first commit.
//
// The device gets the same model (nandsim.SSD.DeferPrograms) when it has
// one: the store writes its chunks into the page cache of its backing file
// and syncs them only at fsync, so the host writes them back by the same
// rules, and chunks of a version freed within the expiry never reach the
// flash.
func (a *Accounts) DeferWriteBack(expire time.Duration, limitBytes int64, now func() time.Time) {
	a.wb = &writeBack{cache: pagecache.New[meta.Ino](expire, limitBytes/a.pageSize, now)}
	if d, ok := a.dev.(deferringDevice); ok {
		d.DeferPrograms(expire, limitBytes/a.pageSize, now)
	}
}

// deferringDevice is a device that can model the host's page cache in
// front of it (nandsim.SSD).
type deferringDevice interface {
	DeferPrograms(expire time.Duration, limitPages int64, now func() time.Time)
	ProgramDue() error
	ProgramDirty() error
}

// deviceWriteBack runs the device's write-back: all of it, or what is due.
func (a *Accounts) deviceWriteBack(all bool) {
	d, ok := a.dev.(deferringDevice)
	if !ok {
		return
	}
	program := d.ProgramDue
	if all {
		program = d.ProgramDirty
	}
	if err := program(); err != nil {
		logrus.WithError(err).Debug("device write-back")
	}
}

// dirty records, once tx commits, that ino's device pages exts were
// written into the page cache; without the model it charges them now.
func (a *Accounts) dirty(tx *meta.Tx, ino meta.Ino, exts []meta.Extent) {
	if len(exts) == 0 {
		return
	}
	wb := a.wb
	if wb == nil {
		a.charge(exts)
		return
	}
	tx.OnCommit(func() {
		wb.mu.Lock()
		for _, e := range exts {
			wb.cache.Dirty(ino, e)
		}
		over := wb.cache.Over()
		wb.mu.Unlock()
		if over {
			a.writeBackOver()
		}
	})
}

// freed forgets, once tx commits, dirty pages of ino that were freed
// (truncate, unlink) before the page cache wrote them.
func (a *Accounts) freed(tx *meta.Tx, ino meta.Ino, drop []meta.Extent) {
	wb := a.wb
	if wb == nil || len(drop) == 0 {
		return
	}
	tx.OnCommit(func() {
		wb.mu.Lock()
		defer wb.mu.Unlock()
		for _, e := range drop {
			wb.cache.Clean(ino, e)
		}
	})
}

// chargeFiles charges the pages of files written back.
func (a *Accounts) chargeFiles(files [][]meta.Extent) {
	for _, exts := range files {
		a.charge(exts)
	}
}

func (a *Accounts) charge(exts []meta.Extent) {
	for _, e := range exts {
		if err := a.shadow.Account(e.Start, e.Len); err != nil {
			logrus.WithError(err).Debug("shadow write")
		}
	}
}

// WriteBackDue charges the files dirty longer than the expiry, as the
// kernel's flusher does when it wakes (every 5 s by default).
func (a *Accounts) WriteBackDue() {
	if a.wb == nil {
		return
	}
	a.wb.mu.Lock()
	due := a.wb.cache.TakeDue()
	a.wb.mu.Unlock()
	a.chargeFiles(due)
	a.deviceWriteBack(false)
}

// WriteBackFile charges ino's dirty pages: fsync of the file.
func (a *Accounts) WriteBackFile(ino meta.Ino) {
	if a.wb == nil {
		return
	}
	a.wb.mu.Lock()
	exts := a.wb.cache.Take(ino)
	a.wb.mu.Unlock()
	a.charge(exts)
}

// WriteBackAll charges every dirty page, the shadow's and the device's:
// sync(2), unmount.
func (a *Accounts) WriteBackAll() {
	if a.wb == nil {
		return
	}
	a.wb.mu.Lock()
	all := a.wb.cache.TakeAll()
	a.wb.mu.Unlock()
	a.chargeFiles(all)
	a.deviceWriteBack(true)
}

// DirtyPages is the shadow pages committed and not yet written back.
func (a *Accounts) DirtyPages() int64 {
	if a.wb == nil {
		return 0
	}
	a.wb.mu.Lock()
	defer a.wb.mu.Unlock()
	return a.wb.cache.Pages()
}

// SparedPages is the shadow pages that a plain filesystem charged at every
// commit would have written and its page cache did not: pages dirtied
// again before their write-back, or freed (unlink, truncate) before it.
// Written, dirty and spared pages together are the every-commit charge.
func (a *Accounts) SparedPages() int64 {
	if a.wb == nil {
		return 0
	}
	a.wb.mu.Lock()
	defer a.wb.mu.Unlock()
	return a.wb.cache.Spared()
}

// writeBackOver writes back the oldest dirty files until the dirty pages
// are under the background limit.
func (a *Accounts) writeBackOver() {
	wb := a.wb
	for {
		wb.mu.Lock()
		_, exts, ok := wb.cache.TakeOldest()
		wb.mu.Unlock()
		if !ok {
			return
		}
		a.charge(exts)
	}
}

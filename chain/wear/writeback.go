package wear

import (
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/meta/extent"
	"github.com/sirupsen/logrus"
)

// The plain filesystem's page cache. A plain filesystem does not write a
// file's pages at close: they stay dirty in the page cache until the file
// is synced, has been dirty longer than the dirty expiry (30 s by default),
// or the dirty bytes pass the background limit. A file deleted or cut
// before then is never written: a last.pt rewritten every few seconds
// costs the disk one copy when it settles, not one per save. With
// DeferWriteBack the shadow follows that model; without it (replay, the
// paper's offline figures) every commit is charged at once.

// writeBack holds the shadow pages committed but not yet written back.
type writeBack struct {
	expire time.Duration
	limit  int64 // pages
	now    func() time.Time

	mu     sync.Mutex
	files  map[meta.Ino]*dirtyFile
	pages  int64 // over files
	spared int64 // pages dirtied again while dirty, or freed while dirty
}

// dirtyFile is one inode's dirty shadow pages (device pages, disjoint) and
// when the first of them was dirtied, which the kernel's expiry counts from.
type dirtyFile struct {
	pages extent.Set
	since time.Time
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
	a.wb = &writeBack{expire: expire, limit: limitBytes / a.pageSize, now: now, files: map[meta.Ino]*dirtyFile{}}
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
		df := wb.files[ino]
		if df == nil {
			df = &dirtyFile{since: wb.now()}
			wb.files[ino] = df
		}
		before := df.pages.Pages()
		for _, e := range exts {
			wb.spared += df.pages.Add(e) // pages dirty again count once
		}
		wb.pages += df.pages.Pages() - before
		over := wb.pages > wb.limit
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
		df := wb.files[ino]
		if df == nil {
			return
		}
		for _, e := range drop {
			removed := df.pages.Remove(e)
			wb.pages -= removed
			wb.spared += removed
		}
		if df.pages.Pages() == 0 {
			delete(wb.files, ino)
		}
	})
}

// take removes and returns the dirty files that pick selects.
func (wb *writeBack) take(pick func(ino meta.Ino, df *dirtyFile) bool) []*dirtyFile {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	var out []*dirtyFile
	for ino, df := range wb.files {
		if pick(ino, df) {
			out = append(out, df)
			wb.pages -= df.pages.Pages()
			delete(wb.files, ino)
		}
	}
	return out
}

func (a *Accounts) chargeFiles(dfs []*dirtyFile) {
	for _, df := range dfs {
		a.charge(df.pages.Extents())
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
	now := a.wb.now()
	a.chargeFiles(a.wb.take(func(_ meta.Ino, df *dirtyFile) bool { return now.Sub(df.since) >= a.wb.expire }))
	a.deviceWriteBack(false)
}

// WriteBackFile charges ino's dirty pages: fsync of the file.
func (a *Accounts) WriteBackFile(ino meta.Ino) {
	if a.wb == nil {
		return
	}
	a.chargeFiles(a.wb.take(func(i meta.Ino, _ *dirtyFile) bool { return i == ino }))
}

// WriteBackAll charges every dirty page, the shadow's and the device's:
// sync(2), unmount.
func (a *Accounts) WriteBackAll() {
	if a.wb == nil {
		return
	}
	a.chargeFiles(a.wb.take(func(meta.Ino, *dirtyFile) bool { return true }))
	a.deviceWriteBack(true)
}

// DirtyPages is the shadow pages committed and not yet written back.
func (a *Accounts) DirtyPages() int64 {
	if a.wb == nil {
		return 0
	}
	a.wb.mu.Lock()
	defer a.wb.mu.Unlock()
	return a.wb.pages
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
	return a.wb.spared
}

// writeBackOver writes back the oldest dirty files until the dirty pages
// are under the background limit.
func (a *Accounts) writeBackOver() {
	wb := a.wb
	for {
		wb.mu.Lock()
		var oldest meta.Ino
		var df *dirtyFile
		if wb.pages > wb.limit {
			for ino, d := range wb.files {
				if df == nil || d.since.Before(df.since) {
					oldest, df = ino, d
				}
			}
		}
		if df != nil {
			wb.pages -= df.pages.Pages()
			delete(wb.files, oldest)
		}
		wb.mu.Unlock()
		if df == nil {
			return
		}
		a.charge(df.pages.Extents())
	}
}

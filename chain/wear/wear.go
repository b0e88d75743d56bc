// Package wear accounts the writes that are not encoded data: the estimate
// of the store's own metadata writes (charged to the simulated device as a
// ring, as a log-structured metadata area would be rewritten), and the
// shadow device, which receives what a plain filesystem with a page cache
// and online discard would have written for the same operations: each
// file's dirty pages once per commit (close or fsync), or, with
// DeferWriteBack, when its page cache would write them back (writeback.go);
// trims when blocks are
// freed (truncate, unlink), and an estimated page of metadata (inode,
// directory block) per change. Every report puts the shadow beside the real
// device.
package wear

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/meta/extent"
	"github.com/sirupsen/logrus"
)

// Counter is a simulated device that counts page writes and trims without
// keeping content. nandsim.SSD satisfies it.
type Counter interface {
	PageSize() int
	LogicalPages() int64
	Account(lpn, n int64) error
	Trim(lpn, n int64) error
}

// Accounts charges metadata writes to the device and models the plain
// filesystem on the shadow.
type Accounts struct {
	dev, shadow Counter
	shAlloc     *meta.Allocator
	pageSize    int64
	metaPages   int64 // pages [0, metaPages) of both devices hold metadata

	mu        sync.Mutex
	metaCur   int64 // next page of the metadata region to account to
	shMetaCur int64
	metaTotal atomic.Int64 // metadata pages accounted on the device
	stagedTot atomic.Int64 // staging pages written back, accounted on the device
	shMetaTot atomic.Int64

	wb *writeBack // nil: the shadow is charged at every commit
}

// New accounts to dev and shadow (equal geometry), whose first metaPages
// pages are the metadata region; the shadow's data pages are allocated
// in db's shadow space.
func New(db *meta.DB, dev, shadow Counter, metaPages int64) (*Accounts, error) {
	if dev.PageSize() != shadow.PageSize() || dev.LogicalPages() != shadow.LogicalPages() {
		return nil, fmt.Errorf("device and shadow differ in geometry")
	}
	sh, err := meta.NewAllocator(db, meta.ShadowSpace, metaPages, shadow.LogicalPages()-metaPages)
	if err != nil {
		return nil, fmt.Errorf("shadow space: %w", err)
	}
	return &Accounts{dev: dev, shadow: shadow, shAlloc: sh, pageSize: int64(dev.PageSize()), metaPages: metaPages}, nil
}

// Metadata charges the store's metadata page writes (bbolt's) to the
// device's metadata region, as a ring, so that rewriting metadata
// invalidates old pages.
func (a *Accounts) Metadata(pages int64) {
	a.metaTotal.Add(pages)
	a.ring(a.dev, &a.metaCur, pages, "account metadata pages")
}

// ShadowMetadata charges the estimate of a plain filesystem's metadata
// writes (inode and directory blocks, journal) to the shadow.
func (a *Accounts) ShadowMetadata(pages int64) {
	a.shMetaTot.Add(pages)
	a.ring(a.shadow, &a.shMetaCur, pages, "account shadow metadata pages")
}

func (a *Accounts) ring(d Counter, cur *int64, pages int64, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for pages > 0 {
		n := min(pages, a.metaPages-*cur)
		if err := d.Account(*cur, n); err != nil {
			logrus.WithError(err).Warn(what)
		}
		*cur = (*cur + n) % a.metaPages
		pages -= n
	}
}

// Staged charges pages of staging files that the host's page cache would
// have written back to the device (fsync, dirty expiry, dirty limit) before
// the store encoded and deleted them. They go to the device's metadata
// region as a ring: a staging file is written once and deleted, as a log
// would be.
func (a *Accounts) Staged(pages int64) {
	a.stagedTot.Add(pages)
	a.ring(a.dev, &a.metaCur, pages, "account staged pages")
}

// StagedPages is the staging pages charged since open.
func (a *Accounts) StagedPages() int64 { return a.stagedTot.Load() }

// MetadataPages and ShadowMetadataPages are the totals charged since open.
func (a *Accounts) MetadataPages() int64       { return a.metaTotal.Load() }
func (a *Accounts) ShadowMetadataPages() int64 { return a.shMetaTot.Load() }

// ShadowSpace is the shadow's data pages and the free ones.
func (a *Accounts) ShadowSpace() (total, free int64) { return a.shAlloc.Pages(), a.shAlloc.FreePages() }

// PageRange is a run of file pages.
type PageRange struct{ First, Count int64 }

// Change describes, for the shadow device, the writes being committed.
type Change struct {
	// Truncated: the file was cut to TruncSize before (some of) the writes,
	// so the plain filesystem freed the blocks past it.
	Truncated bool
	TruncSize int64
	// Dirty lists the file pages written, sorted and disjoint.
	Dirty []PageRange
}

// Rewrite is the change of a file rewritten from scratch to size bytes.
func (a *Accounts) Rewrite(size int64) Change {
	pages := (size + a.pageSize - 1) / a.pageSize
	c := Change{Truncated: true}
	if pages > 0 {
		c.Dirty = []PageRange{{0, pages}}
	}
	return c
}

// PageSize is the shadow's page size: the plain filesystem's block.
func (a *Accounts) PageSize() int64 { return a.pageSize }

// Commit applies, in tx, a change that leaves inode ino newSize bytes long.
// The shadow only counts; if it runs out of space it logs and goes on.
func (a *Accounts) Commit(tx *meta.Tx, ino meta.Ino, c Change, newSize int64) error {
	exts, err := tx.ShadowExtents(ino)
	if err != nil {
		return err
	}
	ps := a.pageSize
	if c.Truncated {
		if exts, err = a.resize(tx, ino, exts, (c.TruncSize+ps-1)/ps); err != nil {
			return err
		}
	}
	if exts, err = a.resize(tx, ino, exts, (newSize+ps-1)/ps); err != nil {
		return err
	}
	var dirty []meta.Extent
	for _, r := range c.Dirty {
		dirty = append(dirty, meta.SubExtents(exts, r.First, r.Count)...)
	}
	a.dirty(tx, ino, dirty)
	a.ShadowMetadata(1)
	return tx.PutShadowExtents(ino, exts)
}

// Release frees, in tx, an inode's shadow pages (unlink of the last name).
func (a *Accounts) Release(tx *meta.Tx, ino meta.Ino) error {
	exts, err := tx.ShadowExtents(ino)
	if err != nil {
		return err
	}
	if _, err := a.resize(tx, ino, exts, 0); err != nil {
		return err
	}
	a.ShadowMetadata(1)
	return tx.PutShadowExtents(ino, nil)
}

// resize grows or shrinks an inode's shadow extents to pages pages; freed
// pages are trimmed on the shadow device.
func (a *Accounts) resize(tx *meta.Tx, ino meta.Ino, exts []meta.Extent, pages int64) ([]meta.Extent, error) {
	have := extent.Pages(exts)
	switch {
	case pages < have:
		keep, drop := splitExtents(exts, pages)
		for _, e := range drop {
			if err := a.shadow.Trim(e.Start, e.Len); err != nil {
				logrus.WithError(err).Debug("shadow trim")
			}
		}
		if err := a.shAlloc.Free(tx, drop); err != nil {
			return nil, err
		}
		a.freed(tx, ino, drop)
		return keep, nil
	case pages > have:
		more, err := a.shAlloc.Reserve(pages - have)
		if err != nil {
			logrus.WithError(err).Debug("shadow device full; its figures undercount")
			return exts, nil
		}
		if err := a.shAlloc.Commit(tx, more); err != nil {
			a.shAlloc.Unreserve(more)
			return nil, err
		}
		tx.OnRollback(func() { a.shAlloc.Unreserve(more) })
		return meta.AppendExtents(exts, more), nil
	}
	return exts, nil
}

// splitExtents cuts a file-ordered extent list after pages pages.
func splitExtents(exts []meta.Extent, pages int64) (keep, drop []meta.Extent) {
	for _, e := range exts {
		switch {
		case pages >= e.Len:
			keep = append(keep, e)
			pages -= e.Len
		case pages > 0:
			keep = append(keep, meta.Extent{Start: e.Start, Len: pages})
			drop = append(drop, meta.Extent{Start: e.Start + pages, Len: e.Len - pages})
			pages = 0
		default:
			drop = append(drop, e)
		}
	}
	return keep, drop
}

// CheckShadow checks that every shadow data page is free or held by one
// inode.
func (a *Accounts) CheckShadow(tx *meta.Tx, problem func(kind, format string, args ...any)) error {
	var used []storage.Owned
	err := tx.ForEachShadow(func(ino meta.Ino, exts []meta.Extent) error {
		for _, e := range exts {
			used = append(used, storage.Owned{Extent: e, Owner: fmt.Sprintf("shadow of inode %d", ino)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	free, err := tx.FreeExtents(meta.ShadowSpace)
	if err != nil {
		return err
	}
	storage.CheckCover(used, free, a.metaPages, a.shadow.LogicalPages(), "shadow", problem)
	return a.shAlloc.CheckMemory(tx, func(f string, args ...any) { problem("allocator", "shadow: "+f, args...) })
}

package chain

import (
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// The shadow device receives what a plain filesystem with a page cache and
// online discard would have written for the same operations: each file's
// dirty pages once per commit (close or fsync), trims when blocks are freed
// (truncate, unlink), and an estimated page of metadata (inode, directory
// block) per change. Every report puts it beside the real device.

// PageRange is a run of file pages.
type PageRange struct{ First, Count int64 }

// ShadowChange describes, for the shadow device, the writes being committed.
type ShadowChange struct {
	// Truncated: the file was cut to TruncSize before (some of) the writes,
	// so the plain filesystem freed the blocks past it.
	Truncated bool
	TruncSize int64
	// Dirty lists the file pages written, sorted and disjoint.
	Dirty []PageRange
}

// RewriteChange is the change of a file rewritten from scratch to size bytes.
func (s *Store) RewriteChange(size int64) ShadowChange {
	pages := (size + int64(s.pageSize) - 1) / int64(s.pageSize)
	c := ShadowChange{Truncated: true}
	if pages > 0 {
		c.Dirty = []PageRange{{0, pages}}
	}
	return c
}

// shadowCommit applies a change that leaves the file newSize bytes long.
// The shadow only counts; if it runs out of space it logs and goes on.
func (tx *Tx) shadowCommit(ino meta.Ino, c ShadowChange, newSize int64) error {
	exts, err := tx.ShadowExtents(ino)
	if err != nil {
		return err
	}
	ps := int64(tx.s.pageSize)
	if c.Truncated {
		if exts, err = tx.shadowResize(exts, (c.TruncSize+ps-1)/ps); err != nil {
			return err
		}
	}
	if exts, err = tx.shadowResize(exts, (newSize+ps-1)/ps); err != nil {
		return err
	}
	for _, r := range c.Dirty {
		for _, e := range mapPages(exts, r.First, r.Count) {
			if err := tx.s.shadow.Account(e.Start, e.Len); err != nil {
				logrus.WithError(err).Debug("shadow write")
			}
		}
	}
	tx.s.accountShadowMetadata(1)
	return tx.PutShadowExtents(ino, exts)
}

// shadowRelease frees an inode's shadow pages (unlink of the last name).
func (tx *Tx) shadowRelease(ino meta.Ino) error {
	exts, err := tx.ShadowExtents(ino)
	if err != nil {
		return err
	}
	if _, err := tx.shadowResize(exts, 0); err != nil {
		return err
	}
	tx.s.accountShadowMetadata(1)
	return tx.PutShadowExtents(ino, nil)
}

// shadowResize grows or shrinks an inode's shadow extents to pages pages;
// freed pages are trimmed on the shadow device.
func (tx *Tx) shadowResize(exts []meta.Extent, pages int64) ([]meta.Extent, error) {
	have := extentPages(exts)
	switch {
	case pages < have:
		keep, drop := splitExtents(exts, pages)
		for _, e := range drop {
			if err := tx.s.shadow.Trim(e.Start, e.Len); err != nil {
				logrus.WithError(err).Debug("shadow trim")
			}
		}
		if err := tx.s.shAlloc.Free(tx.Tx, drop); err != nil {
			return nil, err
		}
		return keep, nil
	case pages > have:
		more, err := tx.s.shAlloc.Reserve(pages - have)
		if err != nil {
			logrus.WithError(err).Debug("shadow device full; its figures undercount")
			return exts, nil
		}
		if err := tx.s.shAlloc.Commit(tx.Tx, more); err != nil {
			tx.s.shAlloc.Unreserve(more)
			return nil, err
		}
		tx.rollback = append(tx.rollback, func() { tx.s.shAlloc.Unreserve(more) })
		return appendExtents(exts, more), nil
	}
	return exts, nil
}

func extentPages(exts []meta.Extent) int64 {
	var n int64
	for _, e := range exts {
		n += e.Len
	}
	return n
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

// mapPages returns the device extents holding file pages [first, first+count).
func mapPages(exts []meta.Extent, first, count int64) []meta.Extent {
	var out []meta.Extent
	end := first + count
	var base int64
	for _, e := range exts {
		lo, hi := max(first, base), min(end, base+e.Len)
		if lo < hi {
			out = append(out, meta.Extent{Start: e.Start + lo - base, Len: hi - lo})
		}
		base += e.Len
		if base >= end {
			break
		}
	}
	return out
}

// Package pagestore keeps data on a page-addressed device (the simulated
// SSD, or anything with the same interface): space comes from an extent
// allocator whose free list lives in the metadata, so that allocation
// commits with the versions that use it.
package pagestore

import (
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// Device is a page-addressed medium. nandsim.SSD satisfies it.
type Device interface {
	PageSize() int
	LogicalPages() int64
	WritePages(lpn int64, data []byte) error
	ReadPages(lpn int64, buf []byte) error
	Trim(lpn, n int64) error
	SyncContent() error
}

// Backend keeps encoded chunks in pages [first, first+pages) of dev.
type Backend struct {
	dev   Device
	alloc *meta.Allocator
	first int64
	end   int64
}

var _ storage.Backend = (*Backend)(nil)

// Open uses pages [first, first+pages) of dev, with the allocator's state
// in db (the device space of the metadata).
func Open(db *meta.DB, dev Device, first, pages int64) (*Backend, error) {
	alloc, err := meta.NewAllocator(db, meta.DeviceSpace, first, pages)
	if err != nil {
		return nil, fmt.Errorf("page store: %w", err)
	}
	return &Backend{dev: dev, alloc: alloc, first: first, end: first + pages}, nil
}

// BlockSize is the device's page size.
func (s *Backend) BlockSize() int { return s.dev.PageSize() }

// Write reserves pages for data and writes it there.
func (s *Backend) Write(data []byte) (storage.Location, error) {
	ps := s.dev.PageSize()
	if len(data)%ps != 0 {
		return nil, fmt.Errorf("page store: write of %d bytes is not whole pages", len(data))
	}
	exts, err := s.alloc.Reserve(int64(len(data) / ps))
	if err != nil {
		return nil, err
	}
	for _, e := range exts {
		n := int(e.Len) * ps
		if err := s.dev.WritePages(e.Start, data[:n]); err != nil {
			s.Release(exts)
			return nil, fmt.Errorf("write %d pages at %d: %w", e.Len, e.Start, err)
		}
		data = data[n:]
	}
	return exts, nil
}

// ReadAt reads the pages of loc that hold [off, off+len(p)), one device
// read per extent, and copies the range out.
func (s *Backend) ReadAt(loc storage.Location, p []byte, off int64) error {
	ps := int64(s.dev.PageSize())
	n := int64(len(p))
	first := off / ps
	pages := (off%ps + n + ps - 1) / ps
	buf := bufpool.Get(int(pages * ps))
	defer bufpool.Put(buf)
	var pageBase int64 // location page index of the current extent's first page
	got := int64(0)    // pages read into buf
	for _, e := range loc {
		if got == pages {
			break
		}
		want := first + got // next location page needed
		if want >= pageBase+e.Len {
			pageBase += e.Len
			continue
		}
		if e.Start < s.first || e.End() > s.end {
			return fmt.Errorf("extent %v outside the data area [%d,%d)", e, s.first, s.end)
		}
		start := want - pageBase
		k := min(e.Len-start, pages-got)
		if err := s.dev.ReadPages(e.Start+start, buf[got*ps:(got+k)*ps]); err != nil {
			return fmt.Errorf("read %d pages at %d: %w", k, e.Start+start, err)
		}
		got += k
		pageBase += e.Len
	}
	if got < pages {
		return fmt.Errorf("location ends %d pages before the range does: %w", pages-got, storage.ErrShortLocation)
	}
	copy(p, buf[off%ps:off%ps+n])
	return nil
}

// Commit makes reserved pages permanent.
func (s *Backend) Commit(tx *meta.Tx, loc storage.Location) error {
	return s.alloc.Commit(tx, loc)
}

// Free returns pages to the free list once tx is durable. The trim is
// queued before the allocator's own hook, so pages are trimmed before any
// other writer can be handed them.
func (s *Backend) Free(tx *meta.Tx, loc storage.Location) error {
	if len(loc) == 0 {
		return nil
	}
	cp := append(storage.Location(nil), loc...)
	tx.OnDurable(func() {
		for _, e := range cp {
			if err := s.dev.Trim(e.Start, e.Len); err != nil {
				logrus.WithError(err).Warnf("trim %d pages at %d", e.Len, e.Start)
			}
		}
	})
	return s.alloc.Free(tx, loc)
}

// Release trims pages that were never committed, so that the device's valid
// pages stay those of committed data, and unreserves them.
func (s *Backend) Release(loc storage.Location) {
	for _, e := range loc {
		_ = s.dev.Trim(e.Start, e.Len)
	}
	s.alloc.Unreserve(loc)
}

// Discard trims pages of a reserved location; Release still gives them back.
func (s *Backend) Discard(loc storage.Location) {
	for _, e := range loc {
		_ = s.dev.Trim(e.Start, e.Len)
	}
}

// Recover: after an unclean stop, pages reserved by uncommitted writes were
// written but never recorded, so the free list already counts them as
// free; trimming the free list makes the device agree.
func (s *Backend) Recover(tx *meta.Tx, clean bool) error {
	if clean {
		return nil
	}
	free, err := tx.FreeExtents(meta.DeviceSpace)
	if err != nil {
		return err
	}
	for _, e := range free {
		if err := s.dev.Trim(e.Start, e.Len); err != nil {
			return fmt.Errorf("trim %v: %w", e, err)
		}
	}
	return nil
}

// Space is the data area's pages and the free ones.
func (s *Backend) Space() (total, free int64) { return s.alloc.Pages(), s.alloc.FreePages() }

// Check checks that every data page is free or owned once.
func (s *Backend) Check(tx *meta.Tx, used []storage.Owned, problem func(kind, format string, args ...any)) error {
	free, err := tx.FreeExtents(meta.DeviceSpace)
	if err != nil {
		return err
	}
	storage.CheckCover(used, free, s.first, s.end, "device", problem)
	return s.alloc.CheckMemory(tx, func(f string, args ...any) { problem("allocator", "device: "+f, args...) })
}

// Sync makes written pages durable.
func (s *Backend) Sync() error { return s.dev.SyncContent() }

package nandsim

import (
	"errors"
	"fmt"
	"time"

	"github.com/ckptfs/ckptfs/meta/extent"
	"github.com/ckptfs/ckptfs/nandsim/pagecache"
	"golang.org/x/sys/unix"
)

// The host's page cache in front of a file backing (nandsim/pagecache).
// ckptfs writes its chunks into the backing without syncing them, so the
// host writes them to the SSD by the page cache's rules, and pages trimmed
// before then (a hole punched into the backing) never reach the flash.
// With DeferPrograms the device follows that model: WritePages keeps the
// content at once and runs the pages through the FTL when the model writes
// them back. The backing is one file, so the expiry counts from the first
// page dirtied since the last write-back, as the kernel's does for one
// inode, and a write-back programs every dirty page.

// hostCache is the pages written but not yet programmed: the dirty pages
// of the backing, one file (backingPages) in the host's page cache.
type hostCache = pagecache.Cache[backingPages]

// backingPages names the backing, the one file of the page cache's model.
type backingPages struct{}

var backingKey backingPages

// DeferPrograms makes the device program written pages when the host's page
// cache would write them back (see above): after expire, when more than
// limitPages are dirty, at Sync or SyncContent (fsync of the backing), at
// ProgramDue once expired, and at Close. now is the clock (time.Now outside
// tests). Without it every write is programmed at once.
func (s *SSD) DeferPrograms(expire time.Duration, limitPages int64, now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hc == nil {
		s.hc = pagecache.New[backingPages](expire, limitPages, now)
	}
}

// dirtyLocked records pages [lpn, lpn+n) as written to the page cache and
// reports whether the dirty pages now pass the limit. Caller holds s.mu.
func (s *SSD) dirtyLocked(lpn, n int64) bool {
	return s.hc.Dirty(backingKey, extent.Extent{Start: lpn, Len: n})
}

// cleanLocked drops pages [lpn, lpn+n) from the dirty set: trimmed before
// the host wrote them. Caller holds s.mu.
func (s *SSD) cleanLocked(lpn, n int64) {
	s.hc.Clean(backingKey, extent.Extent{Start: lpn, Len: n})
}

// writeBackBatch bounds the pages programmed under one hold of s.mu, so
// that a write-back of gigabytes does not stall the device's reads.
const writeBackBatch = 4096

// writeBack programs the pages dirty now (all of them, or none unless the
// oldest is past the expiry), a batch per hold of s.mu. Each batch is taken
// from the dirty set and programmed under one hold, so a trim lands either
// before (the page is never programmed) or after (it is unmapped). The
// caller holds s.life shared.
func (s *SSD) writeBack(onlyDue bool) error {
	s.mu.Lock()
	hc := s.hc
	if hc == nil || hc.Pages() == 0 || (onlyDue && !hc.Due(backingKey)) {
		s.mu.Unlock()
		return nil
	}
	left := hc.Pages()
	s.mu.Unlock()
	for left > 0 {
		s.mu.Lock()
		n, err := s.programFirstLocked(min(left, writeBackBatch))
		hc.Renew(backingKey) // dirtied during the write-back: a new period
		s.mu.Unlock()
		if err != nil || n == 0 {
			return err
		}
		left -= n
	}
	return nil
}

// programFirstLocked takes up to most pages from the front of the dirty set
// and programs them. Caller holds s.mu.
func (s *SSD) programFirstLocked(most int64) (int64, error) {
	var n int64
	for n < most {
		e, ok := s.hc.TakeFirst(backingKey, most-n)
		if !ok {
			break
		}
		n += e.Len
		if err := s.accountLocked(e.Start, e.Len); err != nil {
			return n, err
		}
	}
	return n, nil
}

// ProgramDue writes back the dirty pages when the oldest is past the
// expiry, as the kernel's flusher does when it wakes.
func (s *SSD) ProgramDue() error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	return s.writeBack(true)
}

// ProgramDirty writes back every dirty page (sync(2), unmount).
func (s *SSD) ProgramDirty() error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	return s.writeBack(false)
}

// DirtyPages is the pages written and not yet programmed.
func (s *SSD) DirtyPages() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hc == nil {
		return 0
	}
	return s.hc.Pages()
}

// SparedPages is the pages written that the page cache never programmed:
// trimmed, or written again, while dirty. Programmed, dirty and spared
// pages together are what programming every write costs.
func (s *SSD) SparedPages() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hc == nil {
		return 0
	}
	return s.hc.Spared()
}

// catchUp programs the pages the backing holds that the restored FTL does
// not map: written after the state was saved by a process that then died
// (their page cache outlived it and wrote them), so that statistics lost
// with that process are charged again. The backing reports data by file
// system block and writes zeros where it cannot punch a hole, so a page
// counts only if it holds a nonzero byte. It returns the pages programmed.
func (s *SSD) catchUp() (int64, error) {
	if fst, ok := s.st.(*fileStore); ok && !fst.reportsHoles() {
		return 0, nil // every page would look written
	}
	var unmapped []extent.Extent
	err := s.st.pages(int64(s.cfg.PageSize), func(lpn, n int64) {
		for i := lpn; i < min(lpn+n, int64(s.f.nLogical)); i++ {
			if s.f.l2p.get(int32(i)) >= 0 {
				continue
			}
			if k := len(unmapped) - 1; k >= 0 && unmapped[k].End() == i {
				unmapped[k].Len++
			} else {
				unmapped = append(unmapped, extent.Extent{Start: i, Len: 1})
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("catch up with the backing: %w", err)
	}
	const batch = 256 // pages read at a time
	ps := int64(s.cfg.PageSize)
	buf := make([]byte, batch*ps)
	var n int64
	for _, r := range unmapped {
		for lpn := r.Start; lpn < r.End(); {
			k := min(r.End()-lpn, batch)
			if err := s.st.readAt(buf[:k*ps], lpn*ps); err != nil {
				return n, fmt.Errorf("catch up with the backing: %w", err)
			}
			for i := int64(0); i < k; i++ {
				if allZero(buf[i*ps : (i+1)*ps]) {
					continue
				}
				if err := s.accountLocked(lpn+i, 1); err != nil {
					return n, err
				}
				n++
			}
			lpn += k
		}
	}
	return n, nil
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// reportsHoles says whether SEEK_DATA works on the backing's file system.
func (s *fileStore) reportsHoles() bool {
	_, err := unix.Seek(int(s.f.Fd()), 0, unix.SEEK_DATA)
	return err == nil || errors.Is(err, unix.ENXIO)
}

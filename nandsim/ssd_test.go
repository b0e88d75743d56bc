package nandsim

import (
	"bytes"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

func backings(t *testing.T) map[string]Backing {
	return map[string]Backing{
		"memory": MemoryBacking(),
		"file":   FileBacking(filepath.Join(t.TempDir(), "pages")),
	}
}

func TestWriteReadTrimContent(t *testing.T) {
	for name, b := range backings(t) {
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig()
			s := mustOpen(t, cfg, Options{Backing: b})
			defer s.Close()
			ps := s.PageSize()
			buf := make([]byte, 3*ps)
			if err := s.ReadPages(10, buf); err != nil || !bytes.Equal(buf, make([]byte, 3*ps)) {
				t.Fatalf("unwritten pages: %v, %x", err, buf)
			}
			data := append(append(pageOf(ps, 10, 1), pageOf(ps, 11, 1)...), pageOf(ps, 12, 1)...)
			if err := s.WritePages(10, data); err != nil {
				t.Fatal(err)
			}
			if err := s.WritePages(11, pageOf(ps, 11, 2)); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadPages(10, buf); err != nil {
				t.Fatal(err)
			}
			want := append(append(pageOf(ps, 10, 1), pageOf(ps, 11, 2)...), pageOf(ps, 12, 1)...)
			if !bytes.Equal(buf, want) {
				t.Fatalf("read %x, want %x", buf, want)
			}
			if err := s.Trim(12, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadPages(12, buf[:ps]); err != nil || !bytes.Equal(buf[:ps], make([]byte, ps)) {
				t.Fatalf("trimmed page reads %x (%v)", buf[:ps], err)
			}
			st := s.Stats()
			if st.HostPagesWritten != 4 || st.ValidPages != 2 || st.TrimmedPages != 1 || st.HostPagesRead != 7 {
				t.Errorf("stats %+v: want 4 written, 2 valid, 1 trimmed, 7 read", st)
			}
		})
	}
}

func TestOutOfSpaceChangesNothing(t *testing.T) {
	s := mustOpen(t, tinyConfig(), Options{Backing: MemoryBacking()})
	defer s.Close()
	ps, logical := s.PageSize(), s.LogicalPages()
	for lpn := int64(0); lpn < logical; lpn++ {
		if err := s.WritePages(lpn, pageOf(ps, lpn, 1)); err != nil {
			t.Fatalf("write %d of %d: %v", lpn, logical, err)
		}
	}
	before := s.Stats()
	for _, tc := range []struct{ lpn, pages int64 }{{logical, 1}, {logical - 1, 2}, {-1, 1}, {logical + 100, 3}} {
		err := s.WritePages(tc.lpn, make([]byte, tc.pages*int64(ps)))
		if !errors.Is(err, ErrOutOfSpace) {
			t.Errorf("write %d+%d: %v, want ErrOutOfSpace", tc.lpn, tc.pages, err)
		}
		if err := s.Account(tc.lpn, tc.pages); !errors.Is(err, ErrOutOfSpace) {
			t.Errorf("account %d+%d: %v, want ErrOutOfSpace", tc.lpn, tc.pages, err)
		}
	}
	if err := s.ReadPages(logical, make([]byte, ps)); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("read past the end: %v", err)
	}
	if err := s.Trim(logical-1, 2); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("trim past the end: %v", err)
	}
	after := s.Stats()
	if after.HostPagesWritten != before.HostPagesWritten || after.PagesProgrammed != before.PagesProgrammed || after.ValidPages != before.ValidPages {
		t.Errorf("failed writes changed the stats: %+v -> %+v", before, after)
	}
	buf := make([]byte, ps)
	for lpn := int64(0); lpn < logical; lpn++ {
		if err := s.ReadPages(lpn, buf); err != nil || !bytes.Equal(buf, pageOf(ps, lpn, 1)) {
			t.Fatalf("page %d after failed writes: %x (%v)", lpn, buf, err)
		}
	}
	// The device is full of live data and keeps absorbing overwrites.
	if err := RunWorkload(s, Workload{Kind: Random, Passes: 3, Seed: 2}); err != nil {
		t.Fatal(err)
	}
}

func TestBadLengthsAndClosed(t *testing.T) {
	s := mustOpen(t, tinyConfig(), Options{})
	for _, n := range []int{0, 1, 17} {
		if err := s.WritePages(0, make([]byte, n)); !errors.Is(err, ErrBadLength) {
			t.Errorf("write of %d bytes: %v", n, err)
		}
		if err := s.ReadPages(0, make([]byte, n)); !errors.Is(err, ErrBadLength) {
			t.Errorf("read of %d bytes: %v", n, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Account(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("account after close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// Concurrent writers, readers and trimmers on disjoint ranges: each range
// reads back what its goroutine wrote, and the FTL stays consistent.
// Run with -race.
func TestConcurrentUse(t *testing.T) {
	cfg := smallConfig(2, 64)
	cfg.PageSize = 64
	state := filepath.Join(t.TempDir(), "ftl.state")
	s := mustOpen(t, cfg, Options{Backing: MemoryBacking(), CheckInvariants: true, StatePath: state})
	defer s.Close()
	const workers = 4
	span := s.LogicalPages() / workers
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, cfg.PageSize)
			for round := byte(1); round <= 6; round++ {
				for lpn := w * span; lpn < (w+1)*span; lpn++ {
					if err := s.WritePages(lpn, pageOf(cfg.PageSize, lpn, round)); err != nil {
						errs <- err
						return
					}
				}
				s.Stats()
				if err := s.Sync(); err != nil {
					errs <- err
					return
				}
				for lpn := w * span; lpn < (w+1)*span; lpn += 7 {
					if err := s.ReadPages(lpn, buf); err != nil || !bytes.Equal(buf, pageOf(cfg.PageSize, lpn, round)) {
						errs <- errors.New("concurrent read returned stale or foreign data")
						return
					}
				}
			}
			if err := s.Trim(w*span, span/2); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.ValidPages != workers*(span-span/2) || st.GCRuns == 0 {
		t.Errorf("valid %d (want %d), GC runs %d", st.ValidPages, workers*(span-span/2), st.GCRuns)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(state, cfg); err != nil {
		t.Errorf("state saved under concurrent writes does not load: %v", err)
	}
}

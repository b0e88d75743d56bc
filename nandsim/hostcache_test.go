package nandsim

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"
)

// fakeClock is a settable clock for the page cache model.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func writePages(t *testing.T, s *SSD, lpn, n int64, version byte) {
	t.Helper()
	ps := s.PageSize()
	buf := make([]byte, 0, int(n)*ps)
	for i := int64(0); i < n; i++ {
		buf = append(buf, pageOf(ps, lpn+i, version)...)
	}
	if err := s.WritePages(lpn, buf); err != nil {
		t.Fatalf("write %d+%d: %v", lpn, n, err)
	}
}

func wantCounts(t *testing.T, s *SSD, what string, written, dirty, spared int64) {
	t.Helper()
	if got := s.Stats().HostPagesWritten; got != written {
		t.Errorf("%s: %d pages programmed, want %d", what, got, written)
	}
	if got := s.DirtyPages(); got != dirty {
		t.Errorf("%s: %d pages dirty, want %d", what, got, dirty)
	}
	if got := s.SparedPages(); got != spared {
		t.Errorf("%s: %d pages spared, want %d", what, got, spared)
	}
}

// TestHostCache checks each rule of the page cache model: one case per
// moment the host writes a dirty page back, and the pages it never writes.
func TestHostCache(t *testing.T) {
	const expire = 30 * time.Second
	open := func(t *testing.T, limit int64) (*SSD, *fakeClock) {
		clk := &fakeClock{t: time.Unix(1000, 0)}
		s := mustOpen(t, tinyConfig(), Options{Backing: MemoryBacking()})
		t.Cleanup(func() { s.Close() })
		s.DeferPrograms(expire, limit, clk.now)
		return s, clk
	}
	t.Run("dirty expiry", func(t *testing.T) {
		s, clk := open(t, 100)
		writePages(t, s, 0, 6, 1)
		clk.t = clk.t.Add(20 * time.Second)
		writePages(t, s, 10, 4, 1) // the expiry counts from the first dirty page
		clk.t = clk.t.Add(expire - 20*time.Second - time.Millisecond)
		if err := s.ProgramDue(); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "before the expiry", 0, 10, 0)
		clk.t = clk.t.Add(time.Millisecond)
		if err := s.ProgramDue(); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "at the expiry", 10, 0, 0)
		writePages(t, s, 20, 2, 1) // a new dirty period starts now
		clk.t = clk.t.Add(expire / 2)
		s.ProgramDue()
		wantCounts(t, s, "a new page, half the expiry later", 10, 2, 0)
	})
	t.Run("trimmed before the write-back", func(t *testing.T) {
		s, _ := open(t, 100)
		writePages(t, s, 0, 10, 1)
		if err := s.Trim(2, 4); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "after the trim", 0, 6, 4)
		if err := s.ProgramDirty(); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "after the write-back", 6, 0, 4)
		if st := s.Stats(); st.ValidPages != 6 {
			t.Errorf("%d valid pages, want 6", st.ValidPages)
		}
	})
	t.Run("written again while dirty", func(t *testing.T) {
		s, _ := open(t, 100)
		writePages(t, s, 4, 4, 1)
		writePages(t, s, 6, 4, 2)
		wantCounts(t, s, "dirty", 0, 6, 2)
		s.ProgramDirty()
		wantCounts(t, s, "written back", 6, 0, 2)
	})
	t.Run("background limit", func(t *testing.T) {
		s, _ := open(t, 8)
		writePages(t, s, 0, 5, 1)
		wantCounts(t, s, "under the limit", 0, 5, 0)
		writePages(t, s, 5, 4, 1)
		wantCounts(t, s, "past the limit", 9, 0, 0)
	})
	t.Run("fsync", func(t *testing.T) {
		s, _ := open(t, 100)
		writePages(t, s, 0, 3, 1)
		if err := s.SyncContent(); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, s, "after SyncContent", 3, 0, 0)
	})
	t.Run("reads see dirty content", func(t *testing.T) {
		s, _ := open(t, 100)
		writePages(t, s, 7, 1, 9)
		buf := make([]byte, s.PageSize())
		if err := s.ReadPages(7, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, pageOf(s.PageSize(), 7, 9)) {
			t.Errorf("dirty page read %x", buf)
		}
	})
	t.Run("close", func(t *testing.T) {
		clk := &fakeClock{t: time.Unix(1000, 0)}
		dir := t.TempDir()
		opts := Options{Backing: FileBacking(filepath.Join(dir, "dev")), StatePath: filepath.Join(dir, "state")}
		s := mustOpen(t, tinyConfig(), opts)
		s.DeferPrograms(expire, 100, clk.now)
		writePages(t, s, 0, 5, 1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, tinyConfig(), opts)
		defer s.Close()
		if got := s.Stats().HostPagesWritten; got != 5 {
			t.Errorf("%d pages programmed after close and reopen, want 5", got)
		}
	})
}

// TestCatchUpAfterKill: a process killed with pages dirty leaves them in the
// host's page cache, which writes them; the next open charges them, and
// pages trimmed before the kill are not charged.
func TestCatchUpAfterKill(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Backing: FileBacking(filepath.Join(dir, "dev")), StatePath: filepath.Join(dir, "state")}
	cfg := smallConfig(2, 64)
	s := mustOpen(t, cfg, opts)
	writePages(t, s, 0, 5, 1)
	if err := s.Sync(); err != nil { // the state now maps pages 0-4
		t.Fatal(err)
	}
	s.DeferPrograms(time.Minute, 1000, time.Now)
	writePages(t, s, 100, 3, 1)
	writePages(t, s, 200, 4, 1)
	if err := s.Trim(200, 4); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().HostPagesWritten; got != 5 {
		t.Fatalf("%d pages programmed before the kill, want 5", got)
	}
	// Killed: s is never closed. A new process opens the same files.
	again := mustOpen(t, cfg, opts)
	defer again.Close()
	if !again.StateRestored() {
		t.Fatalf("state not restored: %s", again.StateReason())
	}
	if got := again.Stats().HostPagesWritten; got != 8 {
		t.Errorf("%d pages programmed after the reopen, want 8 (5 synced, 3 left dirty)", got)
	}
	buf := make([]byte, cfg.PageSize)
	if err := again.ReadPages(101, buf); err != nil || !bytes.Equal(buf, pageOf(cfg.PageSize, 101, 1)) {
		t.Errorf("page 101 after the reopen: %v", err)
	}
	if err := again.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// TestHostCacheConcurrent: writers, trims and write-backs at once. Every
// page written is programmed or spared exactly once, and the pages left
// mapped are those not trimmed.
func TestHostCacheConcurrent(t *testing.T) {
	s := mustOpen(t, smallConfig(2, 64), Options{Backing: MemoryBacking()})
	defer s.Close()
	clk := time.Now
	s.DeferPrograms(time.Millisecond, 300, clk)
	const writers, rounds, span = 4, 200, 8
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				s.ProgramDue()
			}
		}
	}()
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			base := int64(w) * 100
			for r := 0; r < rounds; r++ {
				lpn := base + int64(r%10)*span
				buf := make([]byte, span*s.PageSize())
				if err := s.WritePages(lpn, buf); err != nil {
					errs <- err
					return
				}
				if r%3 == 0 {
					if err := s.Trim(lpn, span/2); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := s.ProgramDirty(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if got, want := st.HostPagesWritten+s.SparedPages(), int64(writers*rounds*span); got != want {
		t.Errorf("programmed %d + spared %d = %d, want the %d pages written", st.HostPagesWritten, s.SparedPages(), got, want)
	}
	if s.DirtyPages() != 0 {
		t.Errorf("%d pages dirty after ProgramDirty", s.DirtyPages())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

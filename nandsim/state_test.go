package nandsim

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// counterStats drops the fields a reopen legitimately changes (none today
// but the clock, which restarts idle at the saved time).
func counterStats(st Stats) Stats {
	st.ChannelBusyMs = nil
	st.EraseHistogram = nil
	return st
}

// writeSome writes n random pages with content; returns the expected content.
func writeSome(t *testing.T, s *SSD, n int, seed uint64, version byte) map[int64][]byte {
	t.Helper()
	w := Workload{Kind: HotCold, Seed: seed}
	gen, err := w.generator(s.LogicalPages())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][]byte{}
	for i := 0; i < n; i++ {
		lpn, _ := gen(1)
		p := pageOf(s.PageSize(), lpn, version+byte(i))
		if err := s.WritePages(lpn, p); err != nil {
			t.Fatal(err)
		}
		want[lpn] = p
	}
	return want
}

func checkContent(t *testing.T, s *SSD, want map[int64][]byte) {
	t.Helper()
	buf := make([]byte, s.PageSize())
	for lpn, p := range want {
		if err := s.ReadPages(lpn, buf); err != nil || !bytes.Equal(buf, p) {
			t.Fatalf("page %d: %x (%v), want %x", lpn, buf, err, p)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(2, 32)
	cfg.PageSize = 64
	opts := Options{Backing: FileBacking(filepath.Join(dir, "pages")), StatePath: filepath.Join(dir, "ftl.state")}

	s := mustOpen(t, cfg, opts)
	if s.StateRestored() || !strings.Contains(s.StateReason(), "no state file") {
		t.Errorf("fresh device: restored=%v reason %q", s.StateRestored(), s.StateReason())
	}
	want := writeSome(t, s, 6000, 1, 0)
	if err := s.Trim(3, 5); err != nil {
		t.Fatal(err)
	}
	for lpn := int64(3); lpn < 8; lpn++ {
		want[lpn] = make([]byte, s.PageSize())
	}
	before := s.Stats()
	s.mu.Lock()
	l2p := s.f.l2p.clone()
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, cfg, opts)
	defer s.Close()
	if !s.StateRestored() {
		t.Fatalf("state not restored: %s", s.StateReason())
	}
	after := s.Stats()
	if !slices.Equal(before.ChannelBusyMs, after.ChannelBusyMs) || before.ElapsedMs != after.ElapsedMs {
		t.Errorf("times changed: %v %v -> %v %v", before.ChannelBusyMs, before.ElapsedMs, after.ChannelBusyMs, after.ElapsedMs)
	}
	if a, b := counterStats(before), counterStats(after); !equalStats(a, b) {
		t.Errorf("stats changed over reopen:\n%+v\n%+v", a, b)
	}
	s.mu.Lock()
	same := l2p.equal(&s.f.l2p)
	s.mu.Unlock()
	if !same {
		t.Error("page map changed over reopen")
	}
	checkContent(t, s, want)
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func equalStats(a, b Stats) bool {
	return a.HostPagesWritten == b.HostPagesWritten && a.HostPagesRead == b.HostPagesRead &&
		a.PagesProgrammed == b.PagesProgrammed && a.GCPagesCopied == b.GCPagesCopied &&
		a.GCRuns == b.GCRuns && a.Erases == b.Erases && a.TrimmedPages == b.TrimmedPages &&
		a.ValidPages == b.ValidPages && a.InvalidPages == b.InvalidPages && a.FreeBlocks == b.FreeBlocks &&
		a.EraseCountMax == b.EraseCountMax && a.EraseCountMean == b.EraseCountMean
}

// A reopened device must continue exactly as one that never closed: the
// free-list and bucket order are part of the state.
func TestReopenContinuesIdentically(t *testing.T) {
	cfg := smallConfig(2, 32)
	cfg.PageSize = 64
	run := func(reopen bool) Stats {
		dir := t.TempDir()
		opts := Options{StatePath: filepath.Join(dir, "ftl.state")}
		s := mustOpen(t, cfg, opts)
		if err := RunWorkload(s, Workload{Kind: HotCold, Passes: 2, Seed: 4}); err != nil {
			t.Fatal(err)
		}
		if reopen {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, cfg, opts)
		}
		defer s.Close()
		w := Workload{Kind: Random, Seed: 9}
		gen, _ := w.generator(s.LogicalPages())
		for i := 0; i < 20000; i++ {
			lpn, _ := gen(1)
			if err := s.Account(lpn, 1); err != nil {
				t.Fatal(err)
			}
		}
		return s.Stats()
	}
	a, b := run(false), run(true)
	if !equalStats(counterStats(a), counterStats(b)) {
		t.Errorf("reopen changed the outcome:\n%+v\n%+v", a, b)
	}
}

func TestCorruptOrMissingStateIsSurvived(t *testing.T) {
	// 4 KiB pages: holes in the backing file are per file-system block, so
	// the rebuild maps exactly the written pages only at that page size.
	cfg := smallConfig(2, 32)
	for _, tc := range []struct {
		name   string
		damage func(path string) error
		reason string
	}{
		{"missing", func(p string) error { return os.Remove(p) }, "no state file"},
		{"truncated", func(p string) error {
			b, _ := os.ReadFile(p)
			return os.WriteFile(p, b[:len(b)/2], 0o600)
		}, "checksum"},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o600) }, "shorter than header"},
		{"flipped bits", func(p string) error {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x41
			return os.WriteFile(p, b, 0o600)
		}, "checksum"},
		{"wrong version", func(p string) error {
			b, _ := os.ReadFile(p)
			binary.LittleEndian.PutUint32(b[8:], stateVersion+1)
			return os.WriteFile(p, b, 0o600)
		}, "version 3"},
		{"not a state file", func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("x"), 100), 0o600) }, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Backing: FileBacking(filepath.Join(dir, "pages")), StatePath: filepath.Join(dir, "ftl.state")}
			s := mustOpen(t, cfg, opts)
			want := writeSome(t, s, 3000, 2, 0)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(opts.StatePath); err != nil {
				t.Fatal(err)
			}
			hook := logtest.NewGlobal()
			defer hook.Reset()
			s = mustOpen(t, cfg, opts)
			defer s.Close()
			if s.StateRestored() || !strings.Contains(s.StateReason(), tc.reason) {
				t.Errorf("restored=%v, reason %q, want it to mention %q", s.StateRestored(), s.StateReason(), tc.reason)
			}
			warned := false
			for _, e := range hook.AllEntries() {
				warned = warned || e.Level == logrus.WarnLevel
			}
			if !warned {
				t.Error("no warning logged")
			}
			st := s.Stats()
			if st.HostPagesWritten != 0 || st.Erases != 0 {
				t.Errorf("statistics did not restart: %+v", st)
			}
			// The data is still there, and counted as live.
			checkContent(t, s, want)
			if st.ValidPages != int64(len(want)) {
				t.Errorf("%d valid pages after rebuild, %d written", st.ValidPages, len(want))
			}
			if err := RunWorkload(s, Workload{Kind: Random, Passes: 1, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStateOfAnotherGeometryIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(2, 32)
	opts := Options{Backing: FileBacking(filepath.Join(dir, "pages")), StatePath: filepath.Join(dir, "ftl.state")}
	s := mustOpen(t, cfg, opts)
	want := writeSome(t, s, 500, 3, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.BlocksPerChip = 40
	s = mustOpen(t, cfg, opts)
	defer s.Close()
	if s.StateRestored() || !strings.Contains(s.StateReason(), "another geometry") {
		t.Errorf("restored=%v reason %q", s.StateRestored(), s.StateReason())
	}
	checkContent(t, s, want)
	// Timing and policy may change across a reopen without losing the state.
	s.Close()
	cfg.Policy, cfg.ProgramMs = CostBenefit, 0.5
	s = mustOpen(t, cfg, opts)
	defer s.Close()
	if !s.StateRestored() {
		t.Errorf("state of same geometry not restored: %s", s.StateReason())
	}
}

func TestStateFileIsCompact(t *testing.T) {
	cfg := smallConfig(8, 512)
	s := mustOpen(t, cfg, Options{})
	if err := s.Precondition(PaperPrecondition()); err != nil {
		t.Fatal(err)
	}
	seq := len(encodeState(s.f))
	if err := RunWorkload(s, Workload{Kind: Random, Passes: 1, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	random := len(encodeState(s.f))
	raw := 4 * cfg.LogicalPages()
	t.Logf("%d logical pages: state %d bytes after sequential fill, %d after random writes (raw int32 map %d)", cfg.LogicalPages(), seq, random, raw)
	if int64(seq) > raw/20 || int64(random) > raw {
		t.Errorf("state files of %d and %d bytes for a %d-byte map", seq, random, raw)
	}
}

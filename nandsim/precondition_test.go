package nandsim

import (
	"errors"
	"math"
	"testing"
)

// Table 8 on the default geometry: the split lands within a block per die
// of the request (valid clamped to the logical capacity), and a workload
// afterwards finds GC already due.
func TestPaperPreconditionOnTable4Device(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates the full 8M-page default device")
	}
	cfg := DefaultConfig()
	s := mustOpen(t, cfg, Options{})
	defer s.Close()
	if err := s.Precondition(PaperPrecondition()); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	pages := float64(cfg.PagesPerBlock)
	if st.ValidPages != cfg.LogicalPages() {
		t.Errorf("valid pages %d, want the whole logical capacity %d (Table 8's 111432 blocks exceed it)", st.ValidPages, cfg.LogicalPages())
	}
	if got := float64(st.InvalidPages) / pages; math.Abs(got-13048) > 1 {
		t.Errorf("invalid: %.2f blocks, want 13048", got)
	}
	// Free: Table 8's 6592 plus what the valid clamp left over, less one
	// partly filled block per die.
	wantFree := 131072 - math.Ceil(float64(cfg.LogicalPages())/pages) - 13048
	if got := float64(st.FreeBlocks); math.Abs(got-wantFree) > float64(cfg.Dies()) {
		t.Errorf("free blocks %v, want %v within %d", got, wantFree, cfg.Dies())
	}
	t.Logf("preconditioned: %d valid pages (%.1f blocks), %d invalid (%.1f blocks), %d free blocks",
		st.ValidPages, float64(st.ValidPages)/pages, st.InvalidPages, float64(st.InvalidPages)/pages, st.FreeBlocks)
	if st.HostPagesWritten != 0 || st.PagesProgrammed != 0 || st.Erases != 0 || st.ElapsedMs != 0 {
		t.Errorf("counters not reset: %+v", st)
	}
	// 10% of the capacity rewritten from the start: GC runs, and cleans the
	// stale blocks Table 8 left without copying (the paper's erases track
	// the blocks written).
	n := cfg.LogicalPages() / 10
	if err := s.Account(0, n); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	if st.GCRuns == 0 || st.Erases == 0 {
		t.Fatalf("no GC after preconditioning: %+v", st)
	}
	if st.GCPagesCopied != 0 {
		t.Errorf("%d GC copies; the invalid blocks are whole", st.GCPagesCopied)
	}
	blocksWritten := float64(n) / pages
	if e := float64(st.Erases); e < 0.9*blocksWritten || e > 1.2*blocksWritten {
		t.Errorf("%v erases for %.0f blocks written", e, blocksWritten)
	}
}

// Scattered invalid pages make GC copy from its first run; the split is
// still exact in pages.
func TestScatteredPrecondition(t *testing.T) {
	cfg := smallConfig(4, 256)
	s := mustOpen(t, cfg, Options{CheckInvariants: true})
	p := Precondition{Valid: 0.7, Invalid: 0.2, Free: 0.1, Scatter: true, Seed: 3}
	if err := s.Precondition(p); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	phys := float64(cfg.PhysicalPages())
	if st.ValidPages != int64(math.Round(0.7*phys)) || st.InvalidPages != int64(math.Round(0.2*phys)) {
		t.Errorf("valid %d invalid %d, want %v and %v", st.ValidPages, st.InvalidPages, 0.7*phys, 0.2*phys)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// Rewrite a random tenth of the capacity (rewriting in order would
	// empty whole blocks again).
	w := Workload{Kind: Random, Seed: 4}
	gen, _ := w.generator(s.LogicalPages())
	for i := 0; i < int(0.1*phys); i++ {
		lpn, _ := gen(1)
		if err := s.Account(lpn, 1); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.GCPagesCopied == 0 {
		t.Errorf("scattered stale pages should cost GC copies: %+v", st)
	}
}

func TestPreconditionRefusals(t *testing.T) {
	s := mustOpen(t, tinyConfig(), Options{})
	for _, p := range []Precondition{
		{Valid: 0.5, Invalid: 0.2, Free: 0.2},
		{Valid: -0.1, Invalid: 0.6, Free: 0.5},
		{Valid: math.NaN(), Invalid: 0, Free: 1},
	} {
		if err := s.Precondition(p); err == nil {
			t.Errorf("accepted %+v", p)
		}
	}
	if err := s.Account(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Precondition(PaperPrecondition()); !errors.Is(err, ErrNotFresh) {
		t.Errorf("precondition after a write: %v, want ErrNotFresh", err)
	}
}

// The paper's shares on a small device: invalid is clamped so every die
// keeps its two free blocks, and nothing breaks.
func TestPreconditionClampsToKeepFreeBlocks(t *testing.T) {
	s := mustOpen(t, tinyConfig(), Options{CheckInvariants: true})
	if err := s.Precondition(Precondition{Valid: 0.75, Invalid: 0.25}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.FreeBlocks < 2*int64(tinyConfig().Dies()) {
		t.Errorf("only %d free blocks left", st.FreeBlocks)
	}
	if err := RunWorkload(s, Workload{Kind: Random, Passes: 2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

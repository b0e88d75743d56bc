package nandsim

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Precondition is a warm-up state: shares of all blocks that hold valid
// data, invalid (stale) data, or are free. The three add up to 1.
type Precondition struct {
	Valid, Invalid, Free float64
	// Scatter spreads the invalid pages at random over the used blocks
	// instead of filling whole blocks with them, so GC must copy from the
	// first run (a device aged by random writes rather than sequential ones).
	Scatter bool
	Seed    uint64 // for Scatter
}

// PaperPrecondition is Table 8 of the delta-snapshot paper (111432 valid,
// 13048 invalid and 6592 free of 131072 blocks) as shares, so it scales to
// any geometry. The valid share is a little above 1 - 15% OP: Precondition
// clamps it to the logical capacity.
func PaperPrecondition() Precondition {
	const total = 131072.0
	return Precondition{Valid: 111432 / total, Invalid: 13048 / total, Free: 6592 / total}
}

func (p Precondition) validate() error {
	for _, v := range []float64{p.Valid, p.Invalid, p.Free} {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("precondition shares must be in [0, 1], got valid %v invalid %v free %v", p.Valid, p.Invalid, p.Free)
		}
	}
	if sum := p.Valid + p.Invalid + p.Free; math.Abs(sum-1) > 1e-6 {
		return fmt.Errorf("precondition shares add up to %v, not 1", sum)
	}
	return nil
}

// Precondition brings a fresh device to the requested split, as if it had
// been written before: logical pages 0..V-1 become valid (they read as
// zeros; the host may overwrite them like any page) and I further pages are
// programmed but stale. Placement is striped over dies like host writes and
// runs no GC. Valid is clamped to the logical capacity, Invalid so that
// every die keeps two free blocks. Afterwards the workload counters and the
// clock are reset, so Stats measure the workload alone; per-block erase
// counts are kept (on a fresh device they are zero anyway).
func (s *SSD) Precondition(p Precondition) error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("precondition: %w", err)
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.f.fresh() {
		return fmt.Errorf("precondition: %w: pages were already programmed", ErrNotFresh)
	}
	s.dirty = true
	f := s.f
	pagesPerBlock := float64(s.cfg.PagesPerBlock)
	blocks := float64(s.cfg.TotalBlocks())
	valid := min(int64(math.Round(p.Valid*blocks*pagesPerBlock)), int64(f.nLogical))
	invalid := int64(math.Round(p.Invalid * blocks * pagesPerBlock))
	room := s.cfg.PhysicalPages() - int64(f.nDies)*2*int64(f.pages) - valid
	invalid = max(min(invalid, room), 0)

	rng := rand.New(rand.NewPCG(p.Seed, 0x6e616e6473696d))
	total := valid + invalid
	nextLPN := int32(0)
	for slot := int64(0); slot < total; slot++ {
		// Selection sampling: exactly `invalid` of the slots are stale.
		left := invalid - (slot - int64(nextLPN))
		stale := false
		if p.Scatter {
			stale = rng.Int64N(total-slot) < left
		} else {
			stale = slot < invalid
		}
		lpn := int32(-1)
		if !stale {
			lpn = nextLPN
			nextLPN++
		}
		if !f.place(lpn) {
			return fmt.Errorf("precondition: %w: no room for page %d of %d", ErrInvariant, slot, total)
		}
	}
	f.resetCounters()
	return nil
}

// fresh reports whether no page was ever programmed since the last erase of
// every block, i.e. every block is free.
func (f *ftl) fresh() bool {
	for d := range f.dies {
		if f.dies[d].free.n != f.blocksPerDie {
			return false
		}
	}
	return true
}

// place programs one page on the next die in round-robin order without GC,
// as live lpn or, for lpn -1, as a stale page. A die gives a new block only
// while two are free, like host writes. False when no die has room.
func (f *ftl) place(lpn int32) bool {
	for i := int32(0); i < f.nDies; i++ {
		d := (f.nextDie + i) % f.nDies
		dd := &f.dies[d]
		if dd.host.block < 0 || dd.host.next == f.pages {
			if dd.free.n < 2 {
				continue
			}
			if dd.host.block >= 0 {
				f.closeBlock(dd.host.block)
			}
			f.open(&dd.host, f.popFront(&dd.free))
		}
		f.nextDie = (d + 1) % f.nDies
		if lpn >= 0 {
			f.program(&dd.host, lpn)
		} else {
			dd.host.next++ // programmed, then overwritten elsewhere: stale
		}
		return true
	}
	return false
}

// mapBacking maps every page the backing may hold as live, so a device that
// lost its FTL state still counts its old data. It returns the pages mapped.
func (f *ftl) mapBacking(st store, pageSize int64) (int64, error) {
	var mapped int64
	full := false
	err := st.pages(pageSize, func(lpn, n int64) {
		for i := lpn; i < min(lpn+n, int64(f.nLogical)) && !full; i++ {
			if f.l2p.get(int32(i)) >= 0 {
				continue
			}
			if !f.place(int32(i)) {
				full = true
				return
			}
			mapped++
		}
	})
	if err != nil {
		return mapped, fmt.Errorf("map backing: %w", err)
	}
	return mapped, nil
}

func (f *ftl) resetCounters() {
	f.ctr = counters{}
	f.clock.reset()
}

package nandsim

import (
	"fmt"
	"math/rand/v2"
)

// WorkloadKind names a synthetic write pattern.
type WorkloadKind string

const (
	// Sequential overwrites the logical space in order, one pass after another.
	Sequential WorkloadKind = "seq"
	// Random overwrites uniformly random single pages.
	Random WorkloadKind = "random"
	// HotCold sends HotWrites of the writes to the first HotSpace of the
	// logical pages, uniformly, and the rest to the other pages.
	HotCold WorkloadKind = "hotcold"
)

// Workload is a synthetic write pattern for self-checks and tests. The
// device is first filled sequentially, then WarmupPasses x logical pages
// are written with the pattern to reach steady state; the counters are
// reset and Passes x logical pages more are written: the Stats after
// RunWorkload describe that last part only.
type Workload struct {
	Kind         WorkloadKind
	Passes       float64
	WarmupPasses float64
	Seed         uint64
	HotWrites    float64 // HotCold: share of writes to the hot set (default 0.8)
	HotSpace     float64 // HotCold: share of logical pages that is hot (default 0.2)
}

// RunWorkload runs w on s through Account (no content is stored).
func RunWorkload(s *SSD, w Workload) error {
	if w.Passes < 0 || w.WarmupPasses < 0 {
		return fmt.Errorf("workload: negative passes")
	}
	gen, err := w.generator(s.LogicalPages())
	if err != nil {
		return err
	}
	logical := s.LogicalPages()
	const chunk = 256 // sequential pages per Account call
	for lpn := int64(0); lpn < logical; lpn += chunk {
		if err := s.Account(lpn, min(chunk, logical-lpn)); err != nil {
			return fmt.Errorf("workload fill: %w", err)
		}
	}
	run := func(passes float64) error {
		for left := int64(passes * float64(logical)); left > 0; {
			lpn, n := gen(min(left, chunk))
			if err := s.Account(lpn, n); err != nil {
				return fmt.Errorf("workload %s: %w", w.Kind, err)
			}
			left -= n
		}
		return nil
	}
	if err := run(w.WarmupPasses); err != nil {
		return err
	}
	s.ResetCounters()
	return run(w.Passes)
}

// generator returns a function giving the next run of pages to write, at
// most max long.
func (w Workload) generator(logical int64) (func(max int64) (int64, int64), error) {
	rng := rand.New(rand.NewPCG(w.Seed, 0x776f726b6c6f6164))
	switch w.Kind {
	case Sequential:
		next := int64(0)
		return func(max int64) (int64, int64) {
			lpn := next
			n := min(max, logical-lpn)
			next = (lpn + n) % logical
			return lpn, n
		}, nil
	case Random:
		return func(int64) (int64, int64) { return rng.Int64N(logical), 1 }, nil
	case HotCold:
		hotWrites, hotSpace := w.HotWrites, w.HotSpace
		if hotWrites == 0 {
			hotWrites = 0.8
		}
		if hotSpace == 0 {
			hotSpace = 0.2
		}
		hot := int64(hotSpace * float64(logical))
		if hot <= 0 || hot >= logical || hotWrites < 0 || hotWrites > 1 {
			return nil, fmt.Errorf("workload: hot set of %d of %d pages with %v of the writes is not a hot/cold split", hot, logical, hotWrites)
		}
		return func(int64) (int64, int64) {
			if rng.Float64() < hotWrites {
				return rng.Int64N(hot), 1
			}
			return hot + rng.Int64N(logical-hot), 1
		}, nil
	default:
		return nil, fmt.Errorf("workload: unknown kind %q (want %s, %s or %s)", w.Kind, Sequential, Random, HotCold)
	}
}

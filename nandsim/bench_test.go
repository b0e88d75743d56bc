package nandsim

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// The benchmarks run the default (Table 4) geometry with no backing, in
// steady state with GC running, and report simulated host page writes per
// second of real time. One op = one host page; b.SetBytes makes MB/s the
// host data rate the simulator sustains.

var (
	benchDevices sync.Map // name -> *SSD, warmed once per process
	benchRNG     = rand.New(rand.NewPCG(1, 2))
)

// benchDevice returns a default-geometry device warmed up by warm.
func benchDevice(b *testing.B, name string, p Precondition, warm func(s *SSD) error) *SSD {
	if s, ok := benchDevices.Load(name); ok {
		return s.(*SSD)
	}
	s, err := Open(DefaultConfig(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Precondition(p); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := warm(s); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: warm-up took %v", name, time.Since(t0))
	benchDevices.Store(name, s)
	return s
}

func reportRates(b *testing.B, s *SSD, before Stats, elapsed time.Duration) {
	after := s.Stats()
	host := after.HostPagesWritten - before.HostPagesWritten
	progs := after.PagesProgrammed - before.PagesProgrammed
	b.ReportMetric(float64(host)/elapsed.Seconds(), "host-pages/s")
	b.ReportMetric(float64(progs)/elapsed.Seconds(), "programs/s")
	if host > 0 {
		b.ReportMetric(float64(progs)/float64(host), "waf")
	}
}

// BenchmarkWriteSequential: 256-page sequential writes wrapping around the
// logical space of a device preconditioned to Table 8.
func BenchmarkWriteSequential(b *testing.B) {
	var next int64
	s := benchDevice(b, "seq", PaperPrecondition(), func(*SSD) error { return nil })
	logical := s.LogicalPages()
	b.SetBytes(int64(s.PageSize()))
	before := s.Stats()
	b.ResetTimer()
	t0 := time.Now()
	for done := 0; done < b.N; {
		n := min(int64(256), int64(b.N-done), logical-next)
		if err := s.Account(next, n); err != nil {
			b.Fatal(err)
		}
		next = (next + n) % logical
		done += int(n)
	}
	reportRates(b, s, before, time.Since(t0))
}

// BenchmarkWriteRandom: uniform random single-page writes on a full device
// (5% GC reserve), after one logical capacity of random writes to reach
// steady state.
func BenchmarkWriteRandom(b *testing.B) {
	// One generator for the whole process: a fresh one per invocation would
	// replay the warm-up's addresses, which GC finds unusually easy.
	rng := benchRNG
	p := PaperPrecondition()
	p.Scatter = true
	s := benchDevice(b, "random", p, func(s *SSD) error {
		for i := int64(0); i < s.LogicalPages(); i++ {
			if err := s.Account(rng.Int64N(s.LogicalPages()), 1); err != nil {
				return err
			}
		}
		return nil
	})
	logical := s.LogicalPages()
	b.SetBytes(int64(s.PageSize()))
	before := s.Stats()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if err := s.Account(rng.Int64N(logical), 1); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, s, before, time.Since(t0))
}

package nandsim

import (
	"bytes"
	"testing"
)

// smallConfig is a Table 4 device shrunk to channels x blocks, for golden
// cases that must reach steady state in a fraction of a second.
func smallConfig(channels, blocks int) Config {
	cfg := DefaultConfig()
	cfg.Channels = channels
	cfg.BlocksPerChip = blocks
	return cfg
}

// tinyConfig is the smallest device the validator accepts with room to
// spare: 2 dies of 16 blocks of 4 pages of 16 bytes.
func tinyConfig() Config {
	cfg := DefaultConfig()
	cfg.Channels, cfg.BlocksPerChip, cfg.PagesPerBlock, cfg.PageSize = 2, 16, 4, 16
	cfg.OverProvisioning, cfg.GCReserve, cfg.GCHighWater = 0.25, 0.1, 0.15
	return cfg
}

func mustOpen(t testing.TB, cfg Config, opts Options) *SSD {
	t.Helper()
	s, err := Open(cfg, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// pageOf returns a page whose bytes identify lpn and a version.
func pageOf(size int, lpn int64, version byte) []byte {
	p := bytes.Repeat([]byte{version}, size)
	for i := 0; i < 8 && i < size; i++ {
		p[i] = byte(lpn >> (8 * i))
	}
	return p
}

// steadyWAF runs w on a fresh device with cfg and returns its stats.
func runWorkload(t testing.TB, cfg Config, w Workload) Stats {
	t.Helper()
	s := mustOpen(t, cfg, Options{})
	defer s.Close()
	if err := RunWorkload(s, w); err != nil {
		t.Fatalf("workload %+v: %v", w, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("after workload %+v: %v", w, err)
	}
	return s.Stats()
}

// equal reports whether m and o map the same entries.
func (m *pageMap) equal(o *pageMap) bool {
	if m.n != o.n || m.mapped != o.mapped {
		return false
	}
	for i := int32(0); i < m.n; i++ {
		if m.get(i) != o.get(i) {
			return false
		}
	}
	return true
}

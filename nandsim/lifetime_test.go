package nandsim

import (
	"math"
	"testing"
	"time"
)

// FlashNeuron Section 3.4: 3 DWPD x 5 years x 365 x 8000 GB x 2 (50%
// write) / 3.3 GB/s / 86400 s = 307 days.
func TestEnduranceDaysFlashNeuron(t *testing.T) {
	d := EnduranceDays(3, 5, 8000, 0.5, 3.3)
	if math.Floor(d) != 307 {
		t.Errorf("%.3f days, want 307", d)
	}
	if h := d * 24; math.Abs(h-7374) > 1 {
		t.Errorf("%.1f hours, the paper says about 7374", h)
	}
	if EnduranceDays(3, 5, 8000, 1, 3.3) >= d {
		t.Error("more writes should wear the drive sooner")
	}
}

func TestProjectedLifetime(t *testing.T) {
	cfg := smallConfig(2, 64)
	s := mustOpen(t, cfg, Options{})
	if err := RunWorkload(s, Workload{Kind: Random, Passes: 3, WarmupPasses: 1, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	const limit = 3000
	days, err := s.ProjectedLifetime(limit, st.Erases, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	remaining := float64(st.Blocks)*limit - st.EraseCountMean*float64(st.Blocks)
	want := remaining / (float64(st.Erases) * 24)
	if !within(days, want, 1e-9) {
		t.Errorf("%.4f days, want %.4f (remaining %v erases at %d per hour)", days, want, remaining, st.Erases)
	}
	if twice, _ := s.ProjectedLifetime(limit, 2*st.Erases, time.Hour); !within(twice, days/2, 1e-12) {
		t.Errorf("doubling the erase rate gave %v, want %v", twice, days/2)
	}
	if d, _ := s.ProjectedLifetime(limit, 0, time.Hour); !math.IsInf(d, 1) {
		t.Errorf("no erases: %v days, want +Inf", d)
	}
	if _, err := s.ProjectedLifetime(0, 1, time.Hour); err == nil {
		t.Error("zero P/E limit accepted")
	}
	// A worn-out device has no budget left.
	if d, _ := s.ProjectedLifetime(int64(st.EraseCountMin), 10, time.Hour); d != 0 {
		t.Errorf("limit at the least-worn block: %v days left, want 0", d)
	}
}

package nandsim

import (
	"math"
	"testing"
)

func TestLambertW0(t *testing.T) {
	for _, tc := range []struct{ x, w float64 }{
		{0, 0},
		{math.E, 1},
		{1, 0.5671432904097838}, // the omega constant
		{-1 / math.E, -1},
		{2 * math.Exp(2), 2},
		{1e6, 11.383358086140053},
	} {
		if got := LambertW0(tc.x); math.Abs(got-tc.w) > 1e-12*(1+math.Abs(tc.w)) {
			t.Errorf("W0(%v) = %v, want %v", tc.x, got, tc.w)
		}
	}
	// Near the branch point and across the range: w e^w must give x back.
	for _, x := range []float64{-0.36787944, -0.3678, -0.36275, -0.3, -0.1, -1e-9, 1e-9, 0.5, 3, 10, 1e3} {
		w := LambertW0(x)
		if w < -1 || math.Abs(w*math.Exp(w)-x) > 1e-12*(1+math.Abs(x)) {
			t.Errorf("W0(%v) = %v: w e^w = %v", x, w, w*math.Exp(w))
		}
	}
	if !math.IsNaN(LambertW0(-0.5)) {
		t.Error("W0 below -1/e should be NaN")
	}
}

func TestGreedyWAFBandAt15PercentOP(t *testing.T) {
	lo, hi := GreedyWAFBand(1 / 0.85)
	if math.Abs(lo-10.0/3) > 1e-9 {
		t.Errorf("lower bound %v, want (1+rho)/(2rho) = 3.333", lo)
	}
	// alpha/(alpha + W0(-alpha e^-alpha)) at alpha = 1/0.85, computed
	// independently by bisection of w e^w = x.
	alpha := 1 / 0.85
	x := -alpha * math.Exp(-alpha)
	a, b := -1.0, 0.0
	for i := 0; i < 200; i++ {
		m := (a + b) / 2
		if m*math.Exp(m) < x {
			a = m
		} else {
			b = m
		}
	}
	if want := alpha / (alpha + a); math.Abs(hi-want) > 1e-9 {
		t.Errorf("upper bound %v, want %v", hi, want)
	}
	if hi < 3.4 || hi > 3.6 {
		t.Errorf("upper bound %v, docs/NANDSIM.md expects about 3.5", hi)
	}
}

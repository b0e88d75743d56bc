package nandsim

import "math"

// LambertW0 is the principal branch of the Lambert W function, the w >= -1
// with w e^w = x, for x >= -1/e (NaN below). Halley's iteration from a
// branch-point series near -1/e and a logarithmic guess elsewhere.
func LambertW0(x float64) float64 {
	const minusInvE = -1 / math.E
	switch {
	case math.IsNaN(x) || x < minusInvE:
		return math.NaN()
	case x == minusInvE:
		return -1
	case x == 0:
		return 0
	case math.IsInf(x, 1):
		return x
	}
	var w float64
	if x < -0.25 {
		p := math.Sqrt(2 * (math.E*x + 1))
		w = -1 + p - p*p/3 + 11.0/72*p*p*p
	} else if x < 3 {
		w = math.Log1p(x)
	} else {
		l := math.Log(x)
		w = l - math.Log(l)
	}
	for i := 0; i < 64; i++ {
		ew := math.Exp(w)
		f := w*ew - x
		wp1 := w + 1
		if wp1 == 0 {
			break
		}
		step := f / (ew*wp1 - (w+2)*f/(2*wp1))
		w -= step
		if math.Abs(step) <= 1e-15*(1+math.Abs(w)) {
			break
		}
	}
	return w
}

// GreedyWAFBand is the analytical band for the write amplification of
// uniform random page writes with greedy GC, for alpha = physical / logical
// pages (alpha > 1). Lower: (1+rho)/(2 rho), rho = alpha - 1 the spare
// factor, the closed-form approximation for greedy. Upper: alpha / (alpha +
// W0(-alpha e^-alpha)), the least-recently-written (FIFO) cleaner, which
// greedy should not exceed under uniform traffic. At 15% over-provisioning
// (alpha = 1/0.85) the band is 3.33 to 3.52.
func GreedyWAFBand(alpha float64) (lower, upper float64) {
	if !(alpha > 1) {
		return math.Inf(1), math.Inf(1)
	}
	rho := alpha - 1
	lower = (1 + rho) / (2 * rho)
	upper = alpha / (alpha + LambertW0(-alpha*math.Exp(-alpha)))
	return lower, upper
}

// Alpha is physical / logical pages.
func (c Config) Alpha() float64 {
	return float64(c.PhysicalPages()) / float64(c.LogicalPages())
}

// EffectiveAlpha is Alpha less the free blocks GC holds back: the free
// count swings between the reserve and the high watermark, so on average
// their midpoint per die cannot hold invalid pages. GreedyWAFBand at this
// alpha predicts the WAF with a reserve.
func (c Config) EffectiveAlpha() float64 {
	meanFree := float64(c.lowBlocks()+c.highBlocks()) / 2 * float64(c.Dies()*c.PagesPerBlock)
	return (float64(c.PhysicalPages()) - meanFree) / float64(c.LogicalPages())
}

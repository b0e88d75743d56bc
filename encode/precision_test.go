package encode

import (
	"math"
	"math/rand"
	"testing"
)

// fp16Reference is RoundFP16 in float64 arithmetic: the step of x's
// binade, 2^(e-10), never below float16's subnormal step 2^-24.
func fp16Reference(x float32) float32 {
	a := math.Abs(float64(x))
	switch {
	case math.IsNaN(a), math.IsInf(a, 0), a == 0:
		return x
	case a >= 65520:
		return float32(math.Copysign(math.Inf(1), float64(x)))
	}
	_, e := math.Frexp(a) // a = f * 2^e, f in [0.5, 1)
	step := math.Ldexp(1, max(e-1, -14)-10)
	return float32(math.Copysign(math.RoundToEven(a/step)*step, float64(x)))
}

// TestRoundFP16: RoundFP16 agrees bit for bit with the float64 reference
// on the edges of float16's range and on a million random float32 bit
// patterns, and keeps NaN a NaN.
func TestRoundFP16(t *testing.T) {
	check := func(u uint32) {
		x := math.Float32frombits(u)
		got, want := RoundFP16(x), fp16Reference(x)
		if math.IsNaN(float64(x)) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("RoundFP16(NaN %#08x) = %v", u, got)
			}
			return
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("RoundFP16(%g = %#08x) = %g (%#08x), want %g (%#08x)", x, u, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	edges := []float32{65504, 65519.99, 65520, 65536, 1e9, 6.103515625e-05, 6.1e-05, 5.9604645e-08, 2.9802322e-08, 2.98023259e-08, 1e-10, 1, 1.0009765625, 1.00048828125, 3.14159265}
	for _, e := range edges {
		for _, x := range []float32{e, -e, math.Nextafter32(e, 0), math.Nextafter32(e, 1e30)} {
			check(math.Float32bits(x))
		}
	}
	rng := rand.New(rand.NewSource(16))
	for range 1_000_000 {
		check(rng.Uint32())
	}
	// Every value around float16's normal threshold and its top.
	for _, base := range []uint32{0x38800000, 0x477ff000, 0x33000000} {
		for d := uint32(0); d < 1<<14; d++ {
			check(base - 1<<13 + d)
		}
	}
}

package encode

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
)

// TestRoundBF16Bound checks the bound LossyBF16 states on random bit
// patterns and the edge values: relative error 2^-8 for normal values
// (where it clamps too), 2^-134 absolute among subnormals, NaN stays NaN,
// infinities stay, nothing finite becomes infinite, and rounding twice
// changes nothing.
func TestRoundBF16Bound(t *testing.T) {
	checkRoundBound(t, RoundBF16, 7)
}

// TestRoundMantissaBound checks RoundMantissa as TestRoundBF16Bound checks
// RoundBF16, at 4 bits (LossyM4) and at 7, where it must equal RoundBF16.
func TestRoundMantissaBound(t *testing.T) {
	checkRoundBound(t, func(x float32) float32 { return RoundMantissa(x, 4) }, 4)
	rng := rand.New(rand.NewSource(10))
	for i := 0; i < 100_000; i++ {
		x := math.Float32frombits(rng.Uint32())
		a, b := RoundMantissa(x, 7), RoundBF16(x)
		if math.Float32bits(a) != math.Float32bits(b) && !(math.IsNaN(float64(a)) && math.IsNaN(float64(b))) {
			t.Fatalf("%v: RoundMantissa(7) %v, RoundBF16 %v", x, a, b)
		}
	}
}

// checkRoundBound checks that round keeps k mantissa bits: relative error
// 2^-(k+1) for normal values (where it clamps too), 2^-(127+k) absolute
// among subnormals, NaN stays NaN, infinities stay, nothing finite becomes
// infinite, and rounding twice changes nothing.
func checkRoundBound(t *testing.T, round func(float32) float32, k int) {
	t.Helper()
	low := uint32(1)<<(23-k) - 1
	rng := rand.New(rand.NewSource(9))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1.17549435e-38, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7f800001), 3.3961776e38, 1.00390625, 1.01171875}
	for i := 0; i < 1_000_000; i++ {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, x := range vals {
		r := round(x)
		switch {
		case math.IsNaN(float64(x)):
			if !math.IsNaN(float64(r)) {
				t.Fatalf("NaN %08x became %v", math.Float32bits(x), r)
			}
			continue
		case math.IsInf(float64(x), 0):
			if r != x {
				t.Fatalf("%v became %v", x, r)
			}
			continue
		case math.IsInf(float64(r), 0):
			t.Fatalf("finite %v became %v", x, r)
		}
		if math.Float32bits(r)&low != 0 {
			t.Fatalf("%v -> %v keeps more than %d mantissa bits", x, r, k)
		}
		if round(r) != r {
			t.Fatalf("rounding %v twice gives %v", r, round(r))
		}
		diff := math.Abs(float64(r) - float64(x))
		a := math.Abs(float64(x))
		switch {
		case a < 1.1754943508222875e-38: // subnormal
			if diff > math.Pow(2, float64(-127-k)) {
				t.Fatalf("subnormal %v -> %v: error %g", x, r, diff)
			}
		default:
			if diff > a*math.Pow(2, float64(-k-1)) {
				t.Fatalf("%v -> %v: relative error %g", x, r, diff/a)
			}
		}
	}
}

func TestLossyApplyBytes(t *testing.T) {
	src := make([]byte, 4*1000)
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 1000; i++ {
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	dst := make([]byte, len(src))
	LossyBF16.Apply(dst, src)
	for i := 0; i < 1000; i++ {
		x := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		if got := math.Float32frombits(binary.LittleEndian.Uint32(dst[4*i:])); got != RoundBF16(x) {
			t.Fatalf("value %d: %v, want %v", i, got, RoundBF16(x))
		}
	}
	LossyBF16.Apply(src, src) // in place
	if string(src) != string(dst) {
		t.Fatal("in place differs")
	}
	if _, err := LossyByName("q3"); err == nil {
		t.Fatal("an unknown scheme was accepted")
	}
	if l, err := LossyByName("bf16"); err != nil || l.Name != "bf16" || l.IsZero() {
		t.Fatalf("bf16: %v %v", l, err)
	}
	LossyM4.Apply(dst, src)
	for i := 0; i < 1000; i++ {
		x := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		if got := math.Float32frombits(binary.LittleEndian.Uint32(dst[4*i:])); got != RoundMantissa(x, 4) {
			t.Fatalf("m4 value %d: %v, want %v", i, got, RoundMantissa(x, 4))
		}
	}
}

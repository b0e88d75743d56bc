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
	rng := rand.New(rand.NewSource(9))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1.17549435e-38, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7f800001), 3.3961776e38, 1.00390625, 1.01171875}
	for i := 0; i < 1_000_000; i++ {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, x := range vals {
		r := RoundBF16(x)
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
		if math.Float32bits(r)&0xffff != 0 {
			t.Fatalf("%v -> %v is not a bfloat16 value", x, r)
		}
		if RoundBF16(r) != r {
			t.Fatalf("rounding %v twice gives %v", r, RoundBF16(r))
		}
		diff := math.Abs(float64(r) - float64(x))
		a := math.Abs(float64(x))
		switch {
		case a < 1.1754943508222875e-38: // subnormal
			if diff > math.Pow(2, -134) {
				t.Fatalf("subnormal %v -> %v: error %g", x, r, diff)
			}
		default:
			if diff > a*math.Pow(2, -8) {
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
}

package encode

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// Every transform must invert exactly for every width, shift and length,
// including lengths that are not a multiple of the 8-element fast path.
func TestSplitJoinInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, w := range []int{1, 2, 4, 8} {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 1000} {
			for shift := uint(0); shift < uint(8*w); shift += uint(max(1, w)) {
				if w == 1 && shift > 0 {
					break
				}
				plain := make([]byte, n*w)
				ref := make([]byte, n*w)
				for i := 0; i < n; i++ {
					storeWord(plain[i*w:], w, rng.Uint64()>>shift<<shift)
					storeWord(ref[i*w:], w, rng.Uint64()>>shift<<shift)
				}
				for _, mode := range []planeMode{modeBase, modeXOR, modeSUB} {
					pl := make([]byte, n*w)
					splitAny(pl, plain, ref, n, w, mode, shift)
					out := make([]byte, n*w)
					joinAny(out, pl, ref, n, w, mode, shift)
					if !bytes.Equal(out, plain) {
						t.Fatalf("w=%d n=%d t=%d mode=%d: join(split(x)) != x", w, n, shift, mode)
					}
					if shift > 0 && mode != modeSUB {
						// Dropped bits make the top planes' high bits zero.
						top := pl[(w-1)*n:]
						for _, b := range top {
							if shift >= 8 && b != 0 {
								t.Fatalf("w=%d t=%d mode=%d: top plane not zero", w, shift, mode)
							}
						}
					}
				}
			}
		}
	}
}

// The SUB transform's integer order must be the float order: sorting floats
// by value sorts their mono images, so nearby floats give small deltas.
func TestMonoOrder(t *testing.T) {
	vals := []float32{float32(math.Inf(-1)), -math.MaxFloat32, -2, -1, -math.SmallestNonzeroFloat32,
		float32(math.Copysign(0, -1)), 0, math.SmallestNonzeroFloat32, 1, 2, math.MaxFloat32, float32(math.Inf(1))}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	// sub32(p, 0) with r = +0 is zigzag(mono(p) - mono(+0)); undo the zigzag
	// to compare the signed differences, which must increase.
	prev := int64(math.MinInt64)
	for _, v := range vals {
		z := sub32(math.Float32bits(v), 0, 0, ^uint32(0))
		d := int64(int32(z>>1) ^ -int32(z&1))
		if d <= prev {
			t.Fatalf("mono order broken at %v: %d after %d", v, d, prev)
		}
		prev = d
	}
	// Neighbouring floats are one step apart, across the sign change too.
	if z := sub32(math.Float32bits(math.SmallestNonzeroFloat32), 0, 0, ^uint32(0)); z != 2 {
		t.Fatalf("smallest denormal vs +0: zigzag %d, want 2", z)
	}
	if z := sub32(math.Float32bits(float32(math.Copysign(0, -1))), 0, 0, ^uint32(0)); z != 1 {
		t.Fatalf("-0 vs +0: zigzag %d, want 1", z)
	}
}

// bf16 values widened to fp32 must have their 16 zero bits dropped, so the
// delta of bf16-in-fp32 data costs about what the bf16 delta costs.
func TestBF16InFP32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 1 << 16
	p32 := make([]byte, 4*n)
	r32 := make([]byte, 4*n)
	p16 := make([]byte, 2*n)
	r16 := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		r := float32(rng.NormFloat64() * 0.02)
		p := r + float32(rng.NormFloat64()*0.0005)
		rb := math.Float32bits(r) >> 16
		pb := math.Float32bits(p) >> 16
		putLE32(r32[4*i:], rb<<16)
		putLE32(p32[4*i:], pb<<16)
		putLE16(r16[2*i:], uint16(rb))
		putLE16(p16[2*i:], uint16(pb))
	}
	cd := NewCoder()
	e32 := roundTrip(t, cd, Planes, Float32, p32, r32)
	e16 := roundTrip(t, cd, Planes, BFloat16, p16, r16)
	if float64(len(e32)) > 1.02*float64(len(e16))+64 {
		t.Fatalf("bf16-in-fp32 delta %d bytes, bf16 delta %d: low planes not dropped", len(e32), len(e16))
	}
	b32 := roundTrip(t, cd, Planes, Float32, p32, nil)
	b16 := roundTrip(t, cd, Planes, BFloat16, p16, nil)
	if float64(len(b32)) > 1.02*float64(len(b16))+64 {
		t.Fatalf("bf16-in-fp32 baseline %d bytes, bf16 baseline %d", len(b32), len(b16))
	}
}

package encode

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The AVX2 scaling must write exactly the portable loop's bits: ordinary
// values, zeros of both signs, subnormals, values that overflow to ±Inf or
// underflow to zero when scaled, NaNs with payloads and ±Inf (copied), for
// lengths around its 8-element step and factors of every kind.
func TestScaleKernelMatchesPortable(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	defer func() { useAVX2 = true }()
	specials := []uint32{0, 0x80000000, 1, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
		0x7fc00001, 0xffbfffff, 0x7f800001, 0x00800000, 0x3f800000}
	factors := []float32{1, 0.999, 1.001, -1, 0, 1e-30, 3e38, math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.NaN())}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 50 {
		factors = append(factors, math.Float32frombits(rng.Uint32()))
	}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 64, 1000, 16384 + 5} {
		ref := make([]byte, 4*n+3) // a ragged tail of bytes, copied
		for i := 0; i < n; i++ {
			u := rng.Uint32()
			switch i % 3 {
			case 0:
				u = specials[rng.IntN(len(specials))]
			case 1:
				u = math.Float32bits(float32(rng.NormFloat64() * 1e-3))
			}
			binary.LittleEndian.PutUint32(ref[4*i:], u)
		}
		copy(ref[4*n:], "abc")
		for _, f := range factors {
			useAVX2 = false
			want := scaleRef(Float32, make([]byte, len(ref)), ref, f)
			useAVX2 = true
			got := scaleRef(Float32, make([]byte, len(ref)), ref, f)
			if !bytes.Equal(got, want) {
				for i := 0; i+4 <= len(got); i += 4 {
					if !bytes.Equal(got[i:i+4], want[i:i+4]) {
						t.Fatalf("n=%d f=%x element %d (%08x): AVX2 %08x, portable %08x", n, math.Float32bits(f), i/4,
							binary.LittleEndian.Uint32(ref[i:]), binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:]))
					}
				}
				t.Fatalf("n=%d f=%v: the tail differs", n, f)
			}
		}
	}
}

// go test -run '^$' -bench ScaleRef ./encode/
func BenchmarkScaleRef(b *testing.B) {
	ref := make([]byte, 4<<16)
	for i := 0; i < len(ref); i += 4 {
		binary.LittleEndian.PutUint32(ref[i:], math.Float32bits(float32(i)*1e-6))
	}
	dst := make([]byte, len(ref))
	b.SetBytes(int64(len(ref)))
	for b.Loop() {
		scaleRef(Float32, dst, ref, 0.999)
	}
}

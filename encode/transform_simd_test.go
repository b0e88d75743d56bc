package encode

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The AVX2 kernels must produce exactly the planes of the portable code and
// invert them, for every mode and for lengths around their 32-element step.
func TestSIMDMatchesPortable(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	defer func() { useAVX2 = true }()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, w := range []int{2, 4} {
		for _, n := range []int{31, 32, 33, 64, 95, 1000, 4096 + 17} {
			plain := make([]byte, n*w)
			ref := make([]byte, n*w)
			for i := 0; i < n; i++ {
				v := rng.Uint64()
				switch i % 4 {
				case 0: // a nearby value, either sign
					storeWord(ref[i*w:], w, v)
					storeWord(plain[i*w:], w, v+uint64(rng.IntN(9))-4)
				case 1: // across zero
					storeWord(ref[i*w:], w, v&1)
					storeWord(plain[i*w:], w, 1<<(8*w-1)|v&3)
				default:
					storeWord(ref[i*w:], w, v)
					storeWord(plain[i*w:], w, rng.Uint64())
				}
			}
			for _, mode := range []planeMode{modeBase, modeXOR, modeSUB} {
				useAVX2 = false
				want := make([]byte, n*w)
				splitAny(want, plain, ref, n, w, mode, 0)
				useAVX2 = true
				got := make([]byte, n*w)
				splitAny(got, plain, ref, n, w, mode, 0)
				if !bytes.Equal(got, want) {
					t.Fatalf("w=%d n=%d mode=%d: AVX2 split differs", w, n, mode)
				}
				out := make([]byte, n*w)
				joinAny(out, got, ref, n, w, mode, 0)
				if !bytes.Equal(out, plain) {
					t.Fatalf("w=%d n=%d mode=%d: AVX2 join does not invert", w, n, mode)
				}
			}
		}
	}
}

// The routing kernels must write the same grouped chunks as the portable
// code, and each must decode the other's, for every transform, group
// count, with and without a mask, at lengths around the 8-element step.
func TestRouteKernelsMatchPortable(t *testing.T) {
	if !useRouteAVX2 {
		t.Skip("no routing kernels on this machine or build")
	}
	defer func() { useRouteAVX2 = true }()
	rng := rand.New(rand.NewPCG(7, 8))
	cd := NewCoder()
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		w := dt.Width()
		for _, n := range []int{8, 9, 15, 16, 100, 1000, 4096 + 5} {
			plain, ref := genPair(rng, dt, n, "walk")
			for i := 0; i < n; i += 3 { // a third unchanged
				copy(plain[i*w:(i+1)*w], ref[i*w:(i+1)*w])
			}
			for _, mode := range []planeMode{modeBase, modeXOR, modeSUB} {
				for _, g := range []grouping{{k: 1, masked: true}, {k: 2, thr: [7]byte{120}}, {k: 3, thr: [7]byte{100, 126}, masked: true}, {k: 4, thr: [7]byte{0, 119, 127}, masked: true}} {
					ch := planeChoice{mode: mode, grp: g}
					useRouteAVX2 = true
					a := cd.pl.encodeGrouped(nil, w, plain, ref, n, ch)
					useRouteAVX2 = false
					b := cd.pl.encodeGrouped(nil, w, plain, ref, n, ch)
					if !bytes.Equal(a, b) {
						t.Fatalf("%s n=%d mode=%d %+v: kernel and portable chunks differ", dt, n, mode, g)
					}
					for _, kern := range []bool{true, false} {
						useRouteAVX2 = kern
						out := make([]byte, len(plain))
						if err := cd.decodePlanes(out, dt, a, ref); err != nil || !bytes.Equal(out, plain) {
							t.Fatalf("%s n=%d mode=%d %+v kernels=%t: round trip failed: %v", dt, n, mode, g, kern, err)
						}
					}
				}
			}
		}
	}
}

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

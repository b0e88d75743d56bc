package encode

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The block coder choice rests on estimates; they must track the real
// sizes, or the encoder picks the wrong coder without anyone noticing.
func TestBlockEstimates(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	var ps planeScratch
	nHuff, nSparse := 0, 0
	for _, kind := range []string{"walk", "walk-signflip", "half-same"} {
		plain, ref := genPair(rng, Float32, 65536, kind)
		n := 65536
		pl := make([]byte, 4*n)
		split32(pl, plain, ref, n, modeSUB, 0)
		for j := 0; j < 4; j++ {
			blk := pl[j*n : (j+1)*n]
			var bm blockModel
			bm.analyse(blk)
			if bm.constant(blk) {
				continue
			}
			huff, err := ps.huff(blk, blkHuff4)
			if err == nil {
				nHuff++
				if est := bm.estHuff(); math.Abs(est-float64(len(huff))) > 0.03*float64(n)+64 {
					t.Errorf("%s plane %d: huff0 estimate %.0f, real %d", kind, j, est, len(huff))
				}
			}
			if bm.pmax() > 0.5 {
				nSparse++
				sp := ps.appendSparse(nil, blk, bm.maxSym, 0)
				if est := bm.estSparse(); math.Abs(est-float64(len(sp))) > 0.03*float64(n)+64 {
					t.Errorf("%s plane %d: sparse estimate %.0f, real %d", kind, j, est, len(sp))
				}
			}
		}
	}
	if nHuff < 3 || nSparse < 1 {
		t.Fatalf("only %d huff0 and %d sparse estimates checked", nHuff, nSparse)
	}
	// fastLog2 against math.Log2.
	for _, x := range []float64{1e-9, 0.3, 1, 1.5, 2, 3, 1000, 65536, 123456789} {
		if d := math.Abs(fastLog2(x) - math.Log2(x)); d > 1e-5 {
			t.Errorf("fastLog2(%g) off by %g", x, d)
		}
	}
}

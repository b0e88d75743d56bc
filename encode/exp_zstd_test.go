package encode

import (
	"testing"
)

// TestZstdExperiment measures, per bucket of repeatShare (the share of
// 8-byte words equal to their predecessor), how often zstd beats the
// order-0 block coders on the planes of the real series, and by how much
// (gain per block, as a share of its plain size). zstdRepeat was set from it.
//
// It checks the window in which the block coder tries zstd, [zstdRepeat,
// 0.5): zstd's mean gain per block there must exceed its mean gain below
// zstdRepeat and above 0.5 (where the sparse coder already takes the runs),
// and the series coded with the trial must not be larger than without it.
// Figures with -v:
//
//	go test -run ZstdExperiment -v ./encode/
func TestZstdExperiment(t *testing.T) {
	skipShortSeries(t)
	for _, s := range benchSets(t) {
		cd := NewCoder()
		type row struct{ rep, order0, z float64 }
		var rows []row
		cd.pl.onBlock = func(plane int, blk []byte) {
			if len(blk) < 4096 {
				return
			}
			var ps planeScratch
			ps.noZstd = true
			o := ps.appendBlock(nil, blk, 0)
			z, err := cd.pl.zstdBlock(blk)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row{repeatShare(blk), float64(len(o)) / float64(len(blk)), float64(len(z)) / float64(len(blk))})
		}
		pairs := s.deltaPairs()
		plain, withZstd, withoutZstd := 0, 0, 0
		for _, p := range pairs {
			enc, err := cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			plain += len(p.plain)
			withZstd += len(enc)
		}
		cd.pl.onBlock, cd.pl.noZstd = nil, true
		for _, p := range pairs {
			enc, err := cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			withoutZstd += len(enc)
		}
		// meanGain is zstd's mean gain per block over the blocks whose
		// repeat share is in [lo, hi), and how many there are.
		meanGain := func(lo, hi float64) (float64, int) {
			cnt, gain := 0, 0.0
			for _, r := range rows {
				if r.rep >= lo && r.rep < hi {
					cnt++
					gain += max(r.order0-r.z, 0)
				}
			}
			return gain / float64(max(cnt, 1)), cnt
		}
		buckets := []float64{0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.01}
		for i := 0; i+1 < len(buckets); i++ {
			win := 0
			for _, r := range rows {
				if r.rep >= buckets[i] && r.rep < buckets[i+1] && r.z < r.order0 {
					win++
				}
			}
			g, cnt := meanGain(buckets[i], buckets[i+1])
			t.Logf("%s rep [%.2f,%.2f): blocks %d zstd wins %d mean gain/block %.4f", s.Name, buckets[i], buckets[i+1], cnt, win, g)
		}
		t.Logf("%s: planes %.4f, without the zstd trial %.4f", s.Name, float64(withZstd)/float64(plain), float64(withoutZstd)/float64(plain))
		if withZstd > withoutZstd {
			t.Errorf("%s: the zstd trial made the series larger: %d bytes, %d without it", s.Name, withZstd, withoutZstd)
		}
		in, nIn := meanGain(zstdRepeat, 0.5)
		below, nBelow := meanGain(0, zstdRepeat)
		above, nAbove := meanGain(0.5, 1.01)
		if nIn == 0 {
			t.Logf("%s: no block with a repeat share in [%.2f, 0.5): the window is not checked", s.Name, zstdRepeat)
			continue
		}
		if nBelow > 0 && in <= below {
			t.Errorf("%s: zstd gains %.4f per block in [%.2f, 0.5), no more than %.4f below %.2f, where it is not tried", s.Name, in, zstdRepeat, below, zstdRepeat)
		}
		if nAbove > 0 && in <= above {
			t.Errorf("%s: zstd gains %.4f per block in [%.2f, 0.5), no more than %.4f above 0.5, where it is not tried", s.Name, in, zstdRepeat, above)
		}
	}
}

package encode

import (
	"fmt"
	"os"
	"testing"
)

// TestZstdExperiment measures, per bucket of repeatShare (the share of
// 8-byte words equal to their predecessor), how often zstd beats the
// order-0 block coders on the planes of the real series, and by how much
// (gain per block, as a share of its plain size). zstdRepeat was set from it.
//
//	CKPTFS_EXP=1 go test -run ZstdExperiment -v ./encode/
func TestZstdExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip("set CKPTFS_EXP=1")
	}
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
			z, _ := cd.pl.zstdBlock(blk)
			rows = append(rows, row{repeatShare(blk), float64(len(o)) / float64(len(blk)), float64(len(z)) / float64(len(blk))})
		}
		for _, p := range s.deltaPairs() {
			cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
		}
		buckets := []float64{0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.01}
		for i := 0; i+1 < len(buckets); i++ {
			cnt, win := 0, 0
			gain := 0.0
			for _, r := range rows {
				if r.rep >= buckets[i] && r.rep < buckets[i+1] {
					cnt++
					if r.z < r.order0 {
						win++
						gain += r.order0 - r.z
					}
				}
			}
			fmt.Printf("%s rep [%.2f,%.2f): blocks %d zstd wins %d mean gain/block %.4f\n", s.Name, buckets[i], buckets[i+1], cnt, win, gain/float64(max(cnt, 1)))
		}
	}
}

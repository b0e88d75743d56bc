package encode

import (
	"fmt"
	"os"
	"testing"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

func TestBlockExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip()
	}
	f, _ := os.Create("/tmp/blocks.tsv")
	defer f.Close()
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	for _, s := range benchSets(t) {
		for _, kind := range []string{"delta", "base"} {
			pairs := s.deltaPairs()
			if kind == "base" {
				pairs = s.basePairs()
			}
			cd := NewCoder()
			cd.pl.onBlock = func(plane int, blk []byte) {
				var h [256]uint32
				histogram(blk, &h)
				maxc := uint32(0)
				for _, c := range h {
					maxc = max(maxc, c)
				}
				est := entropyBits(&h, len(blk)) / 8
				var hs huff0.Scratch
				hs.Reuse = huff0.ReusePolicyNone
				hz, herr := 0, ""
				if o, _, err := huff0.Compress4X(blk, &hs); err == nil {
					hz = len(o)
				} else {
					herr = err.Error()
				}
				var fs fse.Scratch
				fz := 0
				if o, err := fse.Compress(blk, &fs); err == nil {
					fz = len(o)
				}
				zz := len(zenc.EncodeAll(blk, nil))
				fmt.Fprintf(f, "%s\t%s\t%d\t%d\t%.4f\t%.1f\t%d\t%d\t%d\t%q\n", s.Name, kind, plane, len(blk), float64(maxc)/float64(len(blk)), est, hz, fz, zz, herr)
			}
			for _, p := range pairs {
				cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
			}
		}
	}
}

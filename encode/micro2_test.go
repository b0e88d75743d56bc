package encode

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

func cpuRate(n int, f func()) float64 {
	var cpu time.Duration
	rounds := 0
	for cpu < 200*time.Millisecond {
		cpu += threadCPU(f)
		rounds++
	}
	return float64(n) * float64(rounds) / cpu.Seconds() / 1e6
}

func TestPlaneCoders(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip()
	}
	s := loadSeries(t, "adam", "fp32", Float32)
	bf := loadSeries(t, "bf16", "bf16", BFloat16)
	n := 65536
	pl := make([]byte, 4*n)
	split32(pl, s.Files[9][4*n*5:], s.Files[8][4*n*5:], n, modeSUB, 0)
	pb := make([]byte, 2*n)
	split16(pb, bf.Files[9][2*n*5:], bf.Files[8][2*n*5:], n, modeSUB, 0)
	planes := map[string][]byte{"adam3": pl[3*n:], "adam2": pl[2*n : 3*n], "bf1": pb[n:], "bf0": pb[:n]}
	for name, p := range planes {
		var hs huff0.Scratch
		hs.Reuse = huff0.ReusePolicyNone
		hc, _, _ := huff0.Compress4X(p, &hs)
		hc = append([]byte(nil), hc...)
		var fs fse.Scratch
		fc, _ := fse.Compress(p, &fs)
		fc = append([]byte(nil), fc...)
		var d huff0.Scratch
		out := make([]byte, n)
		hr := cpuRate(n, func() {
			s2, rest, _ := huff0.ReadTable(hc, &d)
			s2.Decoder().Decompress4X(out[:0:n], rest)
		})
		var fd fse.Scratch
		fr := cpuRate(n, func() { fse.Decompress(fc, &fd) })
		her := cpuRate(n, func() { huff0.Compress4X(p, &hs) })
		fer := cpuRate(n, func() { fse.Compress(p, &fs) })
		var h [256]uint32
		hir := cpuRate(n, func() { histogram(p, &h) })
		fmt.Printf("%s huff %d (enc %.0f dec %.0f MB/s) fse %d (enc %.0f dec %.0f MB/s) hist %.0f\n", name, len(hc), her, hr, len(fc), fer, fr, hir)
	}
	for _, m := range []planeMode{modeBase, modeXOR, modeSUB} {
		p, r := s.Files[9][:4*n], s.Files[8][:4*n]
		out := make([]byte, 4*n)
		fmt.Printf("mode %d split32 %.0f join32 %.0f ", m, cpuRate(4*n, func() { split32(pl, p, r, n, m, 0) }), cpuRate(4*n, func() { join32(out, pl, r, n, m, 0) }))
		p, r = bf.Files[9][:2*n], bf.Files[8][:2*n]
		fmt.Printf("split16 %.0f join16 %.0f\n", cpuRate(2*n, func() { split16(pb, p, r, n, m, 0) }), cpuRate(2*n, func() { join16(out, pb, r, n, m, 0) }))
	}
	big := make([]byte, 4*n)
	fmt.Printf("crc %.0f MB/s\n", cpuRate(4*n, func() { checksum(big) }))
}

package encode

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/encode/cputime"
	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// cpuRate is bytes per microsecond (MB/s) of f on one core, by thread CPU
// time, best of three rounds of at least 50 ms.
func cpuRate(n int, f func()) float64 {
	best := 0.0
	for round := 0; round < 3; round++ {
		var cpu time.Duration
		k := 0
		for cpu < 50*time.Millisecond {
			cpu += cputime.Thread(f)
			k++
		}
		best = max(best, float64(n)*float64(k)/cpu.Seconds()/1e6)
	}
	return best
}

// TestReportComponents prints the per-core speed of the pieces the planes
// codec is made of, on real 64 Ki-element chunks: the entropy coders on a
// skewed (top) and a dense (second) plane, the transforms, CRC-32C. It is
// what the codec's speed budget was planned from (docs/CODECS.md).
//
//	CKPTFS_REPORT=1 go test -run TestReportComponents -v ./encode/
func TestReportComponents(t *testing.T) {
	if os.Getenv("CKPTFS_REPORT") != "1" {
		t.Skip("SKIPPED: a report (component speeds for docs/CODECS.md) that times every coder for a while: set CKPTFS_REPORT=1 to run it (make report)")
	}
	s := loadSeries(t, "adam", "fp32", Float32)
	bf := loadSeries(t, "bf16", "bf16", BFloat16)
	n := chunkElems
	off := 5 * n
	pl := make([]byte, 4*n)
	split32(pl, s.Files[9][4*off:], s.Files[8][4*off:], n, modeSUB, 0)
	pb := make([]byte, 2*n)
	split16(pb, bf.Files[9][2*off:], bf.Files[8][2*off:], n, modeSUB, 0)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-14s %8s %9s %9s %8s %9s %9s %9s\n", "plane", "huff0 B", "enc MB/s", "dec MB/s", "fse B", "enc MB/s", "dec MB/s", "hist MB/s")
	for _, name := range []string{"fp32 top", "fp32 second", "bf16 top", "bf16 low"} {
		p := map[string][]byte{"fp32 top": pl[3*n:], "fp32 second": pl[2*n : 3*n], "bf16 top": pb[n:], "bf16 low": pb[:n]}[name]
		var hs, hd huff0.Scratch
		hs.Reuse = huff0.ReusePolicyNone
		hc, _, err := huff0.Compress4X(p, &hs)
		if err != nil {
			t.Fatal(err)
		}
		hc = append([]byte(nil), hc...)
		var fs, fd fse.Scratch
		fc, err := fse.Compress(p, &fs)
		if err != nil {
			t.Fatal(err)
		}
		fc = append([]byte(nil), fc...)
		out := make([]byte, n)
		var h [256]uint32
		fmt.Fprintf(&sb, "%-14s %8d %9.0f %9.0f %8d %9.0f %9.0f %9.0f\n", name,
			len(hc), cpuRate(n, func() { huff0.Compress4X(p, &hs) }),
			cpuRate(n, func() {
				s2, rest, _ := huff0.ReadTable(hc, &hd)
				s2.Decoder().Decompress4X(out[:0:n], rest)
			}),
			len(fc), cpuRate(n, func() { fse.Compress(p, &fs) }),
			cpuRate(n, func() { fse.Decompress(fc, &fd) }),
			cpuRate(n, func() { histogram(p, &h) }))
	}
	out := make([]byte, 4*n)
	for _, m := range []planeMode{modeBase, modeXOR, modeSUB} {
		p, r := s.Files[9][:4*n], s.Files[8][:4*n]
		fmt.Fprintf(&sb, "transform %s: split32 %.0f join32 %.0f", []string{"base", "xor", "sub"}[m],
			cpuRate(4*n, func() { split32(pl, p, r, n, m, 0) }), cpuRate(4*n, func() { join32(out, pl, r, n, m, 0) }))
		p, r = bf.Files[9][:2*n], bf.Files[8][:2*n]
		fmt.Fprintf(&sb, " split16 %.0f join16 %.0f MB/s\n",
			cpuRate(2*n, func() { split16(pb, p, r, n, m, 0) }), cpuRate(2*n, func() { join16(out, pb, r, n, m, 0) }))
	}
	// Routing (group.go) of a real chunk with four groups and a mask,
	// kernels and portable code: count + route + split, decode + join.
	for _, set := range []struct {
		name string
		s    seriesSet
		dt   DType
	}{{"fp32", s, Float32}, {"bf16", bf, BFloat16}} {
		w := set.dt.Width()
		p, r := set.s.Files[9][w*off:w*(off+n)], set.s.Files[8][w*off:w*(off+n)]
		ch := planeChoice{mode: modeSUB, grp: quantileGroups(r, w, 4, true)}
		for _, kern := range []bool{true, false} {
			if kern && !useRouteAVX2 {
				continue
			}
			old := useRouteAVX2
			useRouteAVX2 = kern
			cd := NewCoder()
			gt := ch.grp.table()
			var cnt [maxGroups]int
			var m int
			var mask []byte
			enc := cpuRate(w*n, func() {
				if kern {
					mask, cnt, m = cd.pl.routeEncode(w, p, r, n, ch, &gt)
				} else {
					mask, cnt, m = cd.pl.scatterEncode(w, p, r, n, ch, &gt)
				}
			})
			buf := append([]byte(nil), cd.pl.buf[:m*w]...)
			o := make([]byte, w*n)
			dec := cpuRate(w*n, func() {
				copy(cd.pl.buf, buf)
				if kern {
					cd.pl.routeDecode(o, w, r, mask, n, m, ch.mode, &ch.grp, &cnt, &gt)
				} else {
					cd.pl.gatherDecode(o, w, r, mask, n, m, ch.mode, 0, &gt, &cnt)
				}
			})
			if !bytes.Equal(o, p) {
				t.Fatalf("%s routing (kernels %t) does not round-trip", set.name, kern)
			}
			fmt.Fprintf(&sb, "route %s, 4 groups + mask, kernels %-5t: split %.0f join %.0f MB/s\n", set.name, kern, enc, dec)
			useRouteAVX2 = old
		}
	}
	fmt.Fprintf(&sb, "crc32c %.0f MB/s\n", cpuRate(4*n, func() { checksum(out) }))
	t.Log(sb.String())
}

package encode

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/encode/cputime"
)

// TestReportRatios prints the acceptance table: codec x data set, coded size
// over plain size (chunk headers included), encode and decode MB/s on one
// core, and the size against dynrle's measured in the same run. Every chunk
// must round-trip, and planes and scaled must code the deltas smaller than
// dynrle.
// CKPTFS_REPORT_CODECS=dynrle,planes limits the codecs;
// CKPTFS_REPORT_BLOCKS=1 adds what the planes blocks were coded with. Gated by
// CKPTFS_REPORT=1 because it takes a while:
//
//	CKPTFS_REPORT=1 go test -run TestReportRatios -v ./encode/
func TestReportRatios(t *testing.T) {
	if os.Getenv("CKPTFS_REPORT") != "1" {
		t.Skip("SKIPPED: a report (the ratio/throughput table of docs/CODECS.md) that times every codec on the whole series (slow): set CKPTFS_REPORT=1 to run it (make report)")
	}
	sets := benchSets(t)
	codecs := Codecs()
	if s := os.Getenv("CKPTFS_REPORT_CODECS"); s != "" {
		codecs = nil
		for _, name := range strings.Split(s, ",") {
			c, err := ParseCodec(name)
			if err != nil {
				t.Fatal(err)
			}
			codecs = append(codecs, c)
		}
	}
	// dynrle first: every other row is compared with it.
	sort.SliceStable(codecs, func(i, j int) bool { return codecs[i] == DynRLE && codecs[j] != DynRLE })
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-9s %-10s %-5s %7s %9s %9s %10s %9s\n", "codec", "data", "kind", "ratio", "enc MB/s", "dec MB/s", "vs dynrle", "dynrle/x")
	for _, s := range sets {
		for _, kind := range []string{"delta", "base"} {
			pairs := s.deltaPairs()
			if kind == "base" {
				pairs = s.basePairs()
			}
			dyn := 0.0
			for _, c := range codecs {
				r := measure(t, c, s.DType, pairs)
				if c == DynRLE {
					dyn = r.ratio
				}
				vs, x := "", ""
				if dyn > 0 && c != DynRLE {
					vs = fmt.Sprintf("%+.1f%%", 100*(r.ratio/dyn-1))
					x = fmt.Sprintf("%.2fx", dyn/r.ratio)
				}
				fmt.Fprintf(&sb, "%-9s %-10s %-5s %7.4f %9.0f %9.0f %10s %9s\n", c, s.Name, kind, r.ratio, r.encMBs, r.decMBs, vs, x)
				// What the table is for: on deltas, the plane codecs code
				// the series smaller than dynrle.
				if kind == "delta" && dyn > 0 && (c == Planes || c == Scaled) && r.ratio >= dyn {
					t.Errorf("%s %s deltas: ratio %.4f, no better than dynrle's %.4f", c, s.Name, r.ratio, dyn)
				}
				if c == Planes && os.Getenv("CKPTFS_REPORT_BLOCKS") == "1" {
					sb.WriteString(r.blocks.String())
				}
			}
		}
	}
	t.Log(sb.String())
}

type measurement struct {
	ratio, encMBs, decMBs float64
	plain, coded          int
	blocks                blockStats // planes only: what each block became
}

// measure codes every pair (checking the round trip), timing encode and
// decode separately, repeated until each side has run for at least 0.3 s.
func measure(t testing.TB, c Codec, dt DType, pairs []chunkPair) measurement {
	cd := NewCoder()
	encs := make([][]byte, len(pairs))
	var m measurement
	for i, p := range pairs {
		enc, err := cd.Encode(nil, c, dt, p.plain, p.ref)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		encs[i] = enc
		m.plain += len(p.plain)
		m.coded += len(enc)
		got, err := cd.Decode(nil, enc, p.ref)
		if err != nil || !bytes.Equal(got, p.plain) {
			t.Fatalf("%s: chunk %d does not round-trip: %v", c, i, err)
		}
	}
	m.ratio = float64(m.coded) / float64(m.plain)
	m.blocks = cd.pl.stats
	var buf []byte
	// Thread CPU time, so the rate is per core and not disturbed by what
	// else the machine runs; best of five rounds of at least 0.1 s each,
	// because a shared machine still slows rounds down (cache, SMT
	// siblings). Garbage collection runs on other threads and is not
	// counted; the codecs allocate little.
	rate := func(f func()) float64 {
		best := 0.0
		for round := 0; round < 5; round++ {
			var cpu time.Duration
			n := 0
			for cpu < 100*time.Millisecond {
				cpu += cputime.Thread(f)
				n++
			}
			best = max(best, float64(m.plain)*float64(n)/cpu.Seconds()/1e6)
		}
		return best
	}
	m.encMBs = rate(func() {
		for _, p := range pairs {
			buf, _ = cd.Encode(buf[:0], c, dt, p.plain, p.ref)
		}
	})
	m.decMBs = rate(func() {
		for i, p := range pairs {
			buf, _ = cd.Decode(buf[:0], encs[i], p.ref)
		}
	})
	return m
}

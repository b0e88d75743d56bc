package encode

import (
	"math"
	"os"
	"testing"
)

// TestScaledExperiment compares scaled with planes on the series' delta
// chunks, with the better of the two per chunk (an oracle that codes the
// chunk against the unscaled and the scaled reference and keeps the
// smaller), and with the exact β2^steps as the factor where scaled scales.
// It checks scaled's cheap choice: scaled must cost at most its predictor
// byte per chunk over planes, beat planes where it scales any chunk, come
// within 0.25% of the oracle, and do at least as well as the exact β2^steps.
// Figures with -v; the speeds of both codecs on the same chunks are
// measured by `go run ./integration/encodeexp --speed`:
//
//	go test -run ScaledExperiment -v ./encode/
func TestScaledExperiment(t *testing.T) {
	skipShortSeries(t)
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s := loadSeries(t, set, "fp32", Float32)
		cd := NewCoder()
		var plain, planes, scaled, oracle, exact, used, chunks int
		steps := map[string]float64{"adam": 128, "adam-stream": 50, "sgd": 128}[set]
		fExact := float32(math.Pow(0.999, steps))
		for _, p := range s.deltaPairs() {
			a, err := cd.Encode(nil, Planes, Float32, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			b, err := cd.Encode(nil, Scaled, Float32, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			if b[headerLen] == predScale {
				used++
			}
			o := len(a)
			if f, ok := chooseScale(s.DType, p.plain, p.ref); f != 1 || ok {
				sr := scaleRef(s.DType, make([]byte, len(p.ref)), p.ref, f)
				c, err := cd.Encode(nil, Planes, Float32, p.plain, sr)
				if err != nil {
					t.Fatal(err)
				}
				o = min(o, len(c)+5)
			}
			x := len(b)
			if b[headerLen] == predScale {
				c, err := cd.Encode(nil, Planes, Float32, p.plain, scaleRef(s.DType, make([]byte, len(p.ref)), p.ref, fExact))
				if err != nil {
					t.Fatal(err)
				}
				x = len(c) + 5
			}
			exact += x
			plain += len(p.plain)
			planes += len(a)
			scaled += len(b)
			oracle += o
			chunks++
		}
		r := func(x int) float64 { return float64(x) / float64(plain) }
		t.Logf("%s: planes %.4f, scaled %.4f (%+.2f%%, scaled on %d chunks), oracle %.4f (scaled %+.3f%%), with beta2^steps where scaled: %.4f", s.Name,
			r(planes), r(scaled), 100*(r(scaled)/r(planes)-1), used, r(oracle), 100*(r(scaled)/r(oracle)-1), r(exact))
		if scaled > planes+chunks {
			t.Errorf("%s: scaled %d bytes, more than planes' %d plus a predictor byte per chunk (%d)", s.Name, scaled, planes, chunks)
		}
		if used > 0 && scaled >= planes {
			t.Errorf("%s: scaled scales %d chunks but takes %d bytes, no fewer than planes' %d", s.Name, used, scaled, planes)
		}
		if float64(scaled) > 1.0025*float64(oracle) {
			t.Errorf("%s: scaled %.4f, %.3f%% over the best of both references per chunk (%.4f)", s.Name, r(scaled), 100*(r(scaled)/r(oracle)-1), r(oracle))
		}
		if scaled > exact {
			t.Errorf("%s: scaled's estimated factor codes to %.4f, worse than the exact beta2^steps (%.4f)", s.Name, r(scaled), r(exact))
		}
	}
}

// BenchmarkScaledSeries codes the adam delta chunks with planes and scaled
// (CKPTFS_EXP=1; wall clock, for profiles).
func BenchmarkScaledSeries(b *testing.B) {
	if os.Getenv("CKPTFS_EXP") == "" {
		b.Skip("a wall-clock profile of the adam series, not part of make bench: set CKPTFS_EXP=1 to run it")
	}
	s := loadSeries(b, "adam", "fp32", Float32)
	pairs := s.deltaPairs()
	plain := 0
	for _, p := range pairs {
		plain += len(p.plain)
	}
	for _, c := range []Codec{Planes, Scaled} {
		cd := NewCoder()
		var encs [][]byte
		for _, p := range pairs {
			e, _ := cd.Encode(nil, c, Float32, p.plain, p.ref)
			encs = append(encs, e)
		}
		out := make([]byte, 0, 1<<20)
		b.Run(c.String()+"/enc", func(b *testing.B) {
			b.SetBytes(int64(plain))
			for b.Loop() {
				for i, p := range pairs {
					out, _ = cd.Encode(out[:0], c, Float32, p.plain, pairs[i].ref)
				}
			}
		})
		b.Run(c.String()+"/dec", func(b *testing.B) {
			b.SetBytes(int64(plain))
			for b.Loop() {
				for i, e := range encs {
					var err error
					if out, err = cd.Decode(out[:0], e, pairs[i].ref); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

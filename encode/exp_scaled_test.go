package encode

import (
	"math"
	"os"
	"testing"
	"time"
)

// TestScaledExperiment compares scaled with planes on the series' delta
// chunks, and with the better of the two per chunk (an oracle that codes
// both), to check scaled's cheap choice.
//
//	CKPTFS_EXP=1 go test -run ScaledExperiment -v ./encode/
func TestScaledExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip("set CKPTFS_EXP=1")
	}
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s := loadSeries(t, set, "fp32", Float32)
		cd := NewCoder()
		var plain, planes, scaled, oracle, exact, used int
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
		}
		speed := func(c Codec) (enc, dec float64) {
			pairs := s.deltaPairs()
			encs := make([][]byte, len(pairs))
			out := make([]byte, 0, 1<<20)
			be, bd := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
			for range 3 {
				be = min(be, threadCPU(func() {
					for i, p := range pairs {
						encs[i], _ = cd.Encode(encs[i][:0], c, Float32, p.plain, p.ref)
					}
				}))
				bd = min(bd, threadCPU(func() {
					for i, e := range encs {
						out, _ = cd.Decode(out[:0], e, pairs[i].ref)
					}
				}))
			}
			return float64(plain) / be.Seconds() / 1e6, float64(plain) / bd.Seconds() / 1e6
		}
		pe, pd := speed(Planes)
		se, sd := speed(Scaled)
		t.Logf("%s: MB/s per core (thread CPU, best of 3): planes %.0f / %.0f, scaled %.0f / %.0f", s.Name, pe, pd, se, sd)
		r := func(x int) float64 { return float64(x) / float64(plain) }
		t.Logf("%s: planes %.4f, scaled %.4f (%+.2f%%, scaled on %d chunks), oracle %.4f, with beta2^steps where scaled: %.4f", s.Name, r(planes), r(scaled),
			100*(r(scaled)/r(planes)-1), used, r(oracle), r(exact))
	}
}

// BenchmarkScaledSeries codes the adam delta chunks with planes and scaled
// (CKPTFS_EXP=1; wall clock, for profiles).
func BenchmarkScaledSeries(b *testing.B) {
	if os.Getenv("CKPTFS_EXP") == "" {
		b.Skip("set CKPTFS_EXP=1")
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

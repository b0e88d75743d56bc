package encode

import (
	"math"
	"os"
	"testing"
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
		r := func(x int) float64 { return float64(x) / float64(plain) }
		t.Logf("%s: planes %.4f, scaled %.4f (%+.2f%%, scaled on %d chunks), oracle %.4f, with beta2^steps where scaled: %.4f", s.Name, r(planes), r(scaled),
			100*(r(scaled)/r(planes)-1), used, r(oracle), r(exact))
	}
}

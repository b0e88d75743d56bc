package encode

import (
	"fmt"
	"os"
	"testing"
)

// TestModeExperiment compares the per-chunk transform choice (sampled
// estimate) with always-XOR, always-SUB and a per-chunk oracle that codes
// every chunk both ways and keeps the smaller.
//
//	CKPTFS_EXP=1 go test -run ModeExperiment -v ./encode/
func TestModeExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip("set CKPTFS_EXP=1")
	}
	for _, s := range benchSets(t) {
		cd := NewCoder()
		size := func(p chunkPair, force *planeMode) int {
			cd.pl.force = force
			enc, err := cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			cd.pl.force = nil
			return len(enc)
		}
		xm, sm := modeXOR, modeSUB
		var auto, xor, sub, oracle, total int
		for _, p := range s.deltaPairs() {
			a, x, su := size(p, nil), size(p, &xm), size(p, &sm)
			auto += a
			xor += x
			sub += su
			oracle += min(x, su)
			total += len(p.plain)
		}
		f := func(v int) float64 { return float64(v) / float64(total) }
		fmt.Printf("%s: auto %.4f  xor %.4f  sub %.4f  oracle %.4f\n", s.Name, f(auto), f(xor), f(sub), f(oracle))
	}
}

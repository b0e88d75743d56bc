package encode

import (
	"testing"
)

// TestModeExperiment compares the per-chunk transform choice (sampled
// estimate) with always-XOR, always-SUB and a per-chunk oracle that codes
// every chunk both ways and keeps the smaller, all without groups (a forced
// mode codes ungrouped planes), so that only the transform choice differs.
// The choice must do at least as well as the better fixed transform, and
// come within 0.5% of the oracle (it picks from a 4096-element sample, and
// also falls back to a baseline where the delta does not pay, which the
// oracle cannot). Figures with -v:
//
//	go test -run ModeExperiment -v ./encode/
func TestModeExperiment(t *testing.T) {
	skipShortSeries(t)
	for _, s := range benchSets(t) {
		cd := NewCoder()
		size := func(p chunkPair, force *planeMode) int {
			cd.pl.force = force
			cd.pl.noGroups = true
			enc, err := cd.Encode(nil, Planes, s.DType, p.plain, p.ref)
			if err != nil {
				t.Fatal(err)
			}
			cd.pl.force, cd.pl.noGroups = nil, false
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
		t.Logf("%s: auto %.4f  xor %.4f  sub %.4f  oracle %.4f", s.Name, f(auto), f(xor), f(sub), f(oracle))
		if auto > min(xor, sub) {
			t.Errorf("%s: the per-chunk choice (%.4f) is worse than always %s (%.4f)", s.Name, f(auto),
				map[bool]string{true: "XOR", false: "SUB"}[xor < sub], f(min(xor, sub)))
		}
		if float64(auto) > 1.005*float64(oracle) {
			t.Errorf("%s: the per-chunk choice (%.4f) is %.2f%% worse than the best of both per chunk (%.4f)", s.Name, f(auto),
				100*(float64(auto)/float64(oracle)-1), f(oracle))
		}
	}
}

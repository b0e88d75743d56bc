package encode

import (
	"fmt"
	"os"
	"testing"
)

// TestGroupExperiment measures what grouping (group.go) and the exact
// choice between close candidates buy on the training series by switching
// them off. Grouping must make the series smaller, and the exact choice
// (which codes the runner-up too and keeps the smaller) must never make it
// larger. Figures with -v; CKPTFS_EXP=1 adds each variant's encode speed
// (MB/s per core, thread CPU time), which takes a few seconds more:
//
//	CKPTFS_EXP=1 go test -run GroupExperiment -v ./encode/
func TestGroupExperiment(t *testing.T) {
	skipShortSeries(t)
	speed := os.Getenv("CKPTFS_EXP") == "1"
	for _, s := range benchSets(t) {
		pairs := s.deltaPairs()
		var ratio [3]float64
		for i, v := range []struct {
			name              string
			noGroups, noExact bool
		}{
			{"plain planes", true, true},
			{"grouped", false, true},
			{"grouped+exact", false, false},
		} {
			cd := NewCoder()
			cd.pl.noGroups, cd.pl.noExact = v.noGroups, v.noExact
			coded, plain, grouped := 0, 0, 0
			var buf []byte
			for _, p := range pairs {
				var err error
				buf, err = cd.Encode(buf[:0], Planes, s.DType, p.plain, p.ref)
				if err != nil {
					t.Fatal(err)
				}
				coded += len(buf)
				plain += len(p.plain)
				if len(buf) > headerLen && buf[headerLen]&modeFlags != 0 {
					grouped++
				}
			}
			ratio[i] = float64(coded) / float64(plain)
			rate := ""
			if speed {
				mbs := cpuRate(plain, func() {
					for _, p := range pairs {
						buf, _ = cd.Encode(buf[:0], Planes, s.DType, p.plain, p.ref)
					}
				})
				rate = fmt.Sprintf("  enc %4.0f MB/s", mbs)
			}
			t.Logf("%-17s %-14s ratio %.4f  grouped chunks %4d/%d%s", s.Name, v.name, ratio[i], grouped, len(pairs), rate)
			if v.noGroups && grouped != 0 {
				t.Errorf("%s: %d chunks grouped with grouping off", s.Name, grouped)
			}
		}
		if ratio[1] >= ratio[0] {
			t.Errorf("%s: grouped %.4f, not smaller than plain planes %.4f", s.Name, ratio[1], ratio[0])
		}
		if ratio[2] > ratio[1] {
			t.Errorf("%s: the exact choice made the series larger: %.4f, %.4f without it", s.Name, ratio[2], ratio[1])
		}
	}
}

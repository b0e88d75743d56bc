package encode

import (
	"fmt"
	"os"
	"testing"
)

// TestGroupExperiment measures what grouping (group.go) and the exact
// choice between close candidates buy on the training series, and their
// encode cost, by switching them off:
//
//	CKPTFS_EXP=1 go test -run GroupExperiment -v ./encode/
func TestGroupExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip("set CKPTFS_EXP=1")
	}
	for _, s := range benchSets(t) {
		pairs := s.deltaPairs()
		for _, v := range []struct {
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
			rate := cpuRate(plain, func() {
				for _, p := range pairs {
					buf, _ = cd.Encode(buf[:0], Planes, s.DType, p.plain, p.ref)
				}
			})
			fmt.Printf("%-17s %-14s ratio %.4f  grouped chunks %4d/%d  enc %4.0f MB/s\n", s.Name, v.name,
				float64(coded)/float64(plain), grouped, len(pairs), rate)
		}
	}
}

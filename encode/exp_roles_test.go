package encode

import (
	"fmt"
	"os"
	"testing"
)

// TestRoleExperiment splits the fp32 series by tensor role (weights, Adam's
// exp_avg and exp_avg_sq, SGD's momentum) and codes every tensor in its own
// 64 Ki-element chunks, as the store cuts them, against the same tensor of
// the previous checkpoint: planes, scaled, dynrle, and planes as a baseline.
//
//	CKPTFS_EXP=1 go test -run RoleExperiment -v ./encode/
//
// It knows the layout integration/py/train_series.py writes for its default
// MLP (256-512-512-512-10): the model's tensors by sorted key, then each
// parameter's optimizer state by sorted key; a file of another size is
// skipped.
func TestRoleExperiment(t *testing.T) {
	if os.Getenv("CKPTFS_EXP") == "" {
		t.Skip("set CKPTFS_EXP=1")
	}
	type tensor struct {
		role string
		n    int
	}
	// Layers as (weight, bias) element counts, in parameter order.
	layers := [][2]int{{512 * 256, 512}, {512 * 512, 512}, {512 * 512, 512}, {10 * 512, 10}}
	layout := func(adam bool) []tensor {
		var ts []tensor
		for _, l := range layers { // model state: "k.bias" sorts before "k.weight"
			ts = append(ts, tensor{"weights", l[1]}, tensor{"weights", l[0]})
		}
		for _, l := range layers { // optimizer state per parameter, weight first
			for _, n := range []int{l[0], l[1]} {
				if adam {
					ts = append(ts, tensor{"exp_avg", n}, tensor{"exp_avg_sq", n}, tensor{"step", 1})
				} else {
					ts = append(ts, tensor{"momentum", n})
				}
			}
		}
		return ts
	}
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s := loadSeries(t, set, "fp32", Float32)
		ts := layout(set != "sgd")
		total := 0
		for _, x := range ts {
			total += 4 * x.n
		}
		if len(s.Files[0]) != total {
			t.Logf("%s: %d bytes, not the default MLP's %d: skipped", set, len(s.Files[0]), total)
			continue
		}
		type acc struct{ plain, planes, scaled, dynrle, base int }
		res := map[string]*acc{}
		var order []string
		cd := NewCoder()
		size := func(c Codec, p, r []byte) int {
			enc, err := cd.Encode(nil, c, Float32, p, r)
			if err != nil {
				t.Fatal(err)
			}
			return len(enc)
		}
		for k := 1; k < len(s.Files); k++ {
			off := 0
			for _, x := range ts {
				a := res[x.role]
				if a == nil {
					a = &acc{}
					res[x.role] = a
					order = append(order, x.role)
				}
				end := off + 4*x.n
				for c := off; c < end; c += 4 * chunkElems {
					ce := min(c+4*chunkElems, end)
					p, r := s.Files[k][c:ce], s.Files[k-1][c:ce]
					a.plain += len(p)
					a.planes += size(Planes, p, r)
					a.scaled += size(Scaled, p, r)
					a.dynrle += size(DynRLE, p, r)
					a.base += size(Planes, p, nil)
				}
				off = end
			}
		}
		var sum acc
		for _, role := range order {
			a := res[role]
			f := func(v int) float64 { return float64(v) / float64(a.plain) }
			fmt.Printf("%-12s %-10s planes %.4f  scaled %.4f  dynrle %.4f  planes baseline %.4f\n", set, role, f(a.planes), f(a.scaled), f(a.dynrle), f(a.base))
			sum.plain += a.plain
			sum.planes += a.planes
			sum.scaled += a.scaled
			sum.dynrle += a.dynrle
		}
		fmt.Printf("%-12s %-10s planes %.4f  scaled %.4f  dynrle %.4f  (planes %+.1f%%, scaled %+.1f%%)\n", set, "all", float64(sum.planes)/float64(sum.plain),
			float64(sum.scaled)/float64(sum.plain), float64(sum.dynrle)/float64(sum.plain), 100*(float64(sum.planes)/float64(sum.dynrle)-1),
			100*(float64(sum.scaled)/float64(sum.dynrle)-1))
	}
}

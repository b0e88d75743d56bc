package analyze

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/chain/internal/ckpttest"
)

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	vals := ckpttest.TrainingSeries(30, 10_000, 1)[0]
	flipped := make([]float32, len(vals))
	for i, v := range vals {
		flipped[i] = -v
	}
	write := func(name string, v []float32) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, ckpttest.NpyFile(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, same, neg := write("a.npy", vals), write("b.npy", vals), write("c.npy", flipped)

	an, err := Compare(a, same)
	if err != nil {
		t.Fatal(err)
	}
	if an.Elements != int64(len(vals)) || len(an.Tensors) != 1 || an.Tensors[0].Identical != 1 {
		t.Fatalf("identical files: %+v", an)
	}
	for _, r := range an.SameHeadingBits {
		if r.Share != 1 {
			t.Fatalf("identical files: %d bits shared by %.3f", r.Bits, r.Share)
		}
	}
	if an.SameHeadingBits[0].Bits != 4 || an.SameHeadingBits[len(an.SameHeadingBits)-1].Bits != 12 {
		t.Fatalf("Table 1 rows %+v, want 4..12 bits", an.SameHeadingBits)
	}

	an, err = Compare(a, neg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range an.SameHeadingBits {
		if r.Share != 0 {
			t.Fatalf("sign-flipped values share their first %d bits in %.3f of cases", r.Bits, r.Share)
		}
	}
	if got := an.Tensors[0].MeanRelChange; got < 1.99 || got > 2.01 {
		t.Fatalf("mean relative change of x -> -x = %.3f, want 2", got)
	}
}

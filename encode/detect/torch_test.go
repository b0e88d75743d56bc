package detect

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestTorchGenerated(t *testing.T) {
	dir := t.TempDir()
	python(t, "gen_torch.py", dir)
	files := readExpect(t, filepath.Join(dir, "expect-torch.json"))
	spans := checkExpected(t, dir, files)

	// Saved under different names, the archive prefixes differ (ckpt-1/ vs
	// ckpt-2/) but every tensor keeps its key and length.
	for _, n := range []string{"ckpt-1", "ckpt-2"} {
		data, err := os.ReadFile(filepath.Join(dir, n+".pt"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(n+"/data.pkl")) {
			t.Fatalf("%s.pt: archive prefix is not %s/: the key test would prove nothing", n, n)
		}
	}
	for _, pair := range [][2]string{{"ckpt-1.pt", "ckpt-2.pt"}, {"legacy-1.pt", "legacy-2.pt"}} {
		a, b := tensorShapes(spans[pair[0]]), tensorShapes(spans[pair[1]])
		if len(a) < 20 || !slices.Equal(a, b) {
			t.Errorf("%s and %s: keys differ or too few:\n%v\n%v", pair[0], pair[1], a, b)
		}
	}
}

type keyShape struct {
	key    string
	dtype  string
	length int64
}

func tensorShapes(spans []Span) []keyShape {
	var ks []keyShape
	for _, s := range spans {
		if s.Kind == Tensor {
			ks = append(ks, keyShape{s.Key, s.DType.String(), s.Length})
		}
	}
	slices.SortFunc(ks, func(a, b keyShape) int {
		if a.key < b.key {
			return -1
		}
		if a.key > b.key {
			return 1
		}
		return 0
	})
	return ks
}

package detect

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/encode"
)

// TestSeries labels the real training checkpoints of `make series`: every
// file is a torch zip labelled without fallback, its float32 bytes add up to
// the .fp32.raw dump written beside it (fp32 series), and consecutive
// checkpoints have the same keys, dtypes and lengths.
func TestSeries(t *testing.T) {
	dir := seriesDir()
	for _, family := range []string{"adam", "sgd", "bf16"} {
		files, _ := filepath.Glob(filepath.Join(dir, family, "ckpt-*.pt"))
		if len(files) == 0 {
			t.Skipf("SKIPPING: no series under %s: run make series (or set CKPTFS_SERIES)", dir)
		}
		if testing.Short() {
			files = files[:2]
		}
		var prev []keyShape
		for i, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			spans, format := label(t, filepath.Base(f), data, whole())
			split, _ := label(t, filepath.Base(f), data, random(int64(i), 1<<16))
			if format != "torch-zip" || !slices.Equal(spans, split) {
				t.Fatalf("%s: format %s, or pieces change the ranges", f, format)
			}
			var f32, tensor int64
			for _, s := range spans {
				if s.Kind == Tensor {
					tensor += s.Length
					if s.DType == encode.Float32 {
						f32 += s.Length
					}
				}
			}
			if float64(tensor) < 0.98*float64(len(data)) {
				t.Errorf("%s: only %d of %d bytes are tensors", f, tensor, len(data))
			}
			if raw, err := os.Stat(strings.TrimSuffix(f, ".pt") + ".fp32.raw"); err == nil && family != "bf16" && f32 != raw.Size() {
				t.Errorf("%s: %d float32 bytes labelled, the fp32 dump has %d", f, f32, raw.Size())
			}
			shapes := tensorShapes(spans)
			if prev != nil && !slices.Equal(prev, shapes) {
				t.Errorf("%s: keys differ from the previous checkpoint", f)
			}
			prev = shapes
		}
	}
}

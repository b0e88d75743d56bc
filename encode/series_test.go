package encode

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The real training series (see integration/py/train_series.py): ten
// consecutive checkpoints of three trainings, as raw little-endian arrays.

// moduleRoot is the directory of the module's go.mod, found from the
// working directory up ("" when there is none).
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// seriesDir finds the series: $CKPTFS_SERIES, else .cache/series beside the
// module's go.mod ("" when neither is known).
func seriesDir() string {
	if d := os.Getenv("CKPTFS_SERIES"); d != "" {
		return d
	}
	if root := moduleRoot(); root != "" {
		return filepath.Join(root, ".cache", "series")
	}
	return ""
}

// seriesSet is one data set of the report: checkpoints of one training in
// one dtype, oldest first.
type seriesSet struct {
	Name  string
	DType DType
	Files [][]byte
}

// loadSeries reads set/ckpt-*.<suffix>.raw, skipping the test (loudly) when
// the series has not been generated.
func loadSeries(tb testing.TB, set, suffix string, dt DType) seriesSet {
	tb.Helper()
	root := seriesDir()
	if root == "" {
		tb.Skip("SKIPPED: the training series is not found: no go.mod above the working directory and CKPTFS_SERIES unset; set CKPTFS_SERIES=DIR (make series writes .cache/series)")
	}
	dir := filepath.Join(root, set)
	if _, err := os.Stat(filepath.Join(dir, ".done")); err != nil {
		tb.Skipf("SKIPPED: no training series in %s (the test codes real training checkpoints): run make series, or set CKPTFS_SERIES=DIR", dir)
	}
	names, err := filepath.Glob(filepath.Join(dir, "ckpt-*."+suffix+".raw"))
	if err != nil || len(names) < 2 {
		tb.Skipf("SKIPPED: fewer than 2 %s checkpoints in %s, a delta needs two: remove %s and run make series", suffix, dir, dir)
	}
	sort.Strings(names)
	s := seriesSet{Name: set + "/" + suffix, DType: dt}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		s.Files = append(s.Files, b)
	}
	return s
}

// benchSets are the data sets of the acceptance table.
//
// CKPTFS_BENCH_SETS=a,b names other float32 sets of the series directory
// instead (view_check.py raw writes one from a training's checkpoints).
func benchSets(tb testing.TB) []seriesSet {
	tb.Helper()
	if names := os.Getenv("CKPTFS_BENCH_SETS"); names != "" {
		var sets []seriesSet
		for _, name := range strings.Split(names, ",") {
			sets = append(sets, loadSeries(tb, name, "fp32", Float32))
		}
		return sets
	}
	return []seriesSet{
		loadSeries(tb, "adam", "fp32", Float32),
		loadSeries(tb, "sgd", "fp32", Float32),
		loadSeries(tb, "bf16", "bf16", BFloat16),
		loadSeries(tb, "adam-stream", "fp32", Float32),
	}
}

// chunkPair is one unit of work: chunk i of checkpoint k, and the same chunk
// of checkpoint k-1 (nil for baselines).
type chunkPair struct{ plain, ref []byte }

const chunkElems = 64 << 10

// deltaPairs cuts every checkpoint after the first into 64 Ki-element chunks,
// each paired with the same chunk of the previous checkpoint (progressive).
func (s seriesSet) deltaPairs() []chunkPair {
	var out []chunkPair
	cb := chunkElems * s.DType.Width()
	for k := 1; k < len(s.Files); k++ {
		cur, prev := s.Files[k], s.Files[k-1]
		for off := 0; off < len(cur) && off < len(prev); off += cb {
			end := min(off+cb, len(cur), len(prev))
			out = append(out, chunkPair{cur[off:end], prev[off:end]})
		}
	}
	return out
}

// basePairs chunks the first checkpoint, without references.
func (s seriesSet) basePairs() []chunkPair {
	var out []chunkPair
	cb := chunkElems * s.DType.Width()
	f := s.Files[0]
	for off := 0; off < len(f); off += cb {
		out = append(out, chunkPair{f[off:min(off+cb, len(f))], nil})
	}
	return out
}

// skipShortSeries skips, under -short, a test that codes the whole series
// several times over.
func skipShortSeries(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("SKIPPED in -short: codes the whole training series several times over; run without -short")
	}
}

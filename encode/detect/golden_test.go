package detect

import (
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const goldenDir = "testdata/golden"

func goldenFiles(tb testing.TB) []expectFile {
	return readExpect(tb, filepath.Join(goldenDir, "expect.json"))
}

// TestGolden checks the committed real files (made by testdata/make_golden.py)
// without Python.
func TestGolden(t *testing.T) {
	files := goldenFiles(t)
	checkExpected(t, goldenDir, files)
	formats := map[string]bool{}
	for _, f := range files {
		formats[f.Format] = true
	}
	for _, want := range []string{"torch-zip", "torch-legacy", "npy", "npz", "safetensors", "caffe"} {
		if !formats[want] {
			t.Errorf("no golden file of format %s", want)
		}
	}
}

// TestGoldenDamaged cuts and mutates the golden files: labels must still
// cover every byte, identically for any piece sizes.
func TestGoldenDamaged(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	rounds := 40
	if os.Getenv("CKPTFS_FULL") == "1" {
		rounds = 2000
	}
	for _, f := range goldenFiles(t) {
		data, err := os.ReadFile(filepath.Join(goldenDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rounds; i++ {
			cut := data[:r.Intn(len(data)+1)]
			damaged := slices.Clone(data)
			for k := 1 + r.Intn(4); k > 0; k-- {
				damaged[r.Intn(len(damaged))] = byte(r.Intn(256))
			}
			// Bytes inserted or removed shift everything after them.
			at := r.Intn(len(data))
			shifted := slices.Concat(data[:at], data[at+r.Intn(len(data)-at):])
			if r.Intn(2) == 0 {
				shifted = slices.Concat(data[:at], make([]byte, r.Intn(40)), data[at:])
			}
			for _, d := range [][]byte{cut, damaged, shifted} {
				checkSplits(t, f.Name, nil, d, r.Int63())
			}
		}
	}
}

// checkSplits labels data whole, in 1-byte pieces and in random pieces from
// seed, and fails unless all give the same ranges, format and layout.
func checkSplits(t *testing.T, name string, force func() machine, data []byte, seed int64) {
	t.Helper()
	newDet := func() Detector {
		d := newDispatcher(name)
		d.force = force
		return d
	}
	d := newDet()
	want, wf, err := labelWith(d, data, whole())
	if err != nil {
		t.Fatalf("%s (%d bytes) whole: %v", name, len(data), err)
	}
	wl := d.Layout()
	r := rand.New(rand.NewSource(seed))
	small := fixed(1)
	if len(data) > 4096 {
		small = random(seed, 8) // 1-byte pieces of big inputs make fuzzing crawl
	}
	splits := []splitter{small, random(seed, 1+r.Intn(64)), random(seed+1, 1+r.Intn(4096))}
	for i, next := range splits {
		d := newDet()
		got, gf, err := labelWith(d, data, next)
		if err != nil {
			t.Fatalf("%s (%d bytes) split %d: %v", name, len(data), i, err)
		}
		if gf != wf || !slices.Equal(got, want) {
			t.Fatalf("%s (%d bytes) split %d: %s %v\nwhole: %s %v", name, len(data), i, gf, got, wf, want)
		}
		if gl := d.Layout(); gl != wl {
			t.Fatalf("%s (%d bytes) split %d: layout %+v, whole: %+v", name, len(data), i, gl, wl)
		}
	}
}

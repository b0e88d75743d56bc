package detect

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// splitter returns the size of the next piece (at least 1).
type splitter func() int

func whole() splitter      { return func() int { return 1 << 62 } }
func fixed(n int) splitter { return func() int { return n } }
func random(seed int64, max int) splitter {
	r := rand.New(rand.NewSource(seed))
	return func() int { return 1 + r.Intn(max) }
}

// label feeds data to a new detector in pieces and returns the merged ranges
// and the format. It fails the test if any call's spans do not cover its
// piece exactly and in order.
func label(tb testing.TB, name string, data []byte, next splitter) ([]Span, string) {
	tb.Helper()
	spans, format, err := labelChecked(name, data, next)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return spans, format
}

func labelChecked(name string, data []byte, next splitter) ([]Span, string, error) {
	return labelWith(New(name), data, next)
}

// labelWith is labelChecked with a given detector.
func labelWith(d Detector, data []byte, next splitter) ([]Span, string, error) {
	var all, buf []Span
	var off int64
	for len(data) > 0 {
		n := min(next(), len(data))
		buf = d.Label(buf[:0], data[:n])
		at := off
		for _, s := range buf {
			if s.Offset != at || s.Length <= 0 {
				return nil, "", fmt.Errorf("piece [%d,%d): span %v does not follow %d", off, off+int64(n), s, at)
			}
			if s.Region > s.Offset {
				return nil, "", fmt.Errorf("span %v starts before its region", s)
			}
			at += s.Length
		}
		if at != off+int64(n) {
			return nil, "", fmt.Errorf("piece [%d,%d): spans end at %d", off, off+int64(n), at)
		}
		all = append(all, buf...)
		off += int64(n)
		data = data[n:]
	}
	merged := Merge(nil, all)
	if err := checkRegions(merged); err != nil {
		return nil, "", err
	}
	return merged, d.Format(), nil
}

// checkRegions checks that each region is one contiguous range starting at
// its Region offset, and that no region is labelled twice.
func checkRegions(merged []Span) error {
	seen := map[int64]bool{}
	for _, s := range merged {
		if s.Region != s.Offset {
			return fmt.Errorf("range %v does not start at its region", s)
		}
		if seen[s.Region] {
			return fmt.Errorf("region %d appears twice", s.Region)
		}
		seen[s.Region] = true
	}
	return nil
}

// invariant labels data whole, byte by byte and in random pieces, checks all
// give the same ranges, and returns them.
func invariant(tb testing.TB, name string, data []byte) ([]Span, string) {
	tb.Helper()
	want, format := label(tb, name, data, whole())
	splits := map[string]splitter{"1": fixed(1), "7": fixed(7), "4096": fixed(4096)}
	for seed := int64(1); seed <= 3; seed++ {
		splits[fmt.Sprintf("random%d", seed)] = random(seed, 1+len(data)/int(seed*seed*3))
	}
	if len(data) > 1<<20 {
		delete(splits, "1") // keep the suite fast; the fuzzers cover small pieces
		delete(splits, "7")
	}
	for sname, next := range splits {
		got, f := label(tb, name, data, next)
		if f != format || !slices.Equal(got, want) {
			tb.Fatalf("%s: pieces %s give %s %v, one piece gives %s %v", name, sname, f, got, format, want)
		}
	}
	return want, format
}

type expectJSON struct {
	Files []expectFile `json:"files"`
}

type expectFile struct {
	Name    string      `json:"name"`
	Format  string      `json:"format"`
	Tensors []expTensor `json:"tensors"`
}

type expTensor struct {
	Key    string `json:"key"`
	DType  string `json:"dtype"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

func readExpect(tb testing.TB, path string) []expectFile {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var e expectJSON
	if err := json.Unmarshal(b, &e); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if len(e.Files) == 0 {
		tb.Fatalf("%s lists no files", path)
	}
	return e.Files
}

// tensorsOf lists the tensor ranges, in stream order.
func tensorsOf(spans []Span) []expTensor {
	var ts []expTensor
	for _, s := range spans {
		if s.Kind == Tensor {
			ts = append(ts, expTensor{s.Key, s.DType.String(), s.Offset, s.Length})
		}
	}
	return ts
}

// checkExpected labels each listed file in dir and compares its tensor ranges
// and format with what the generator computed. It returns the ranges by name.
func checkExpected(t *testing.T, dir string, files []expectFile) map[string][]Span {
	out := map[string][]Span{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		spans, format := invariant(t, f.Name, data)
		if format != f.Format {
			t.Errorf("%s: format %q, want %q", f.Name, format, f.Format)
		}
		got, want := tensorsOf(spans), f.Tensors
		if want == nil {
			want = []expTensor{}
		}
		if got == nil {
			got = []expTensor{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: tensors\n got %v\nwant %v", f.Name, got, want)
		}
		out[f.Name] = spans
	}
	return out
}

// python runs a generator script from testdata with /usr/bin/python3, or skips.
func python(t *testing.T, script string, args ...string) {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		needDeps(t, "%s missing", py)
	}
	abs, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{abs}, args...)...)
	cmd.Dir = filepath.Dir(abs)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // keep testdata clean
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
			needDeps(t, "%s: %s", script, out) // the script says a module is missing
		}
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

func needDeps(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING (external dependency missing; set CKPTFS_REQUIRE_DEPS=1 to fail instead): " + msg)
}

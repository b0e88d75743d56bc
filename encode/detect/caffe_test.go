package detect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCaffeGenerated(t *testing.T) {
	dir := t.TempDir()
	python(t, "gen_caffe.py", dir)
	spans := checkExpected(t, dir, readExpect(t, filepath.Join(dir, "expect-caffe.json")))
	for _, pair := range [][2]string{
		{"snap_iter_100.caffemodel", "snap_iter_200.caffemodel"},
		{"snap_iter_100.solverstate", "snap_iter_200.solverstate"},
	} {
		a, b := tensorShapes(spans[pair[0]]), tensorShapes(spans[pair[1]])
		if len(a) < 4 || !slices.Equal(a, b) {
			t.Errorf("%s and %s: keys differ or too few:\n%v\n%v", pair[0], pair[1], a, b)
		}
	}

	// Without the name hint a Caffe file has no magic: it is generic.
	data, err := os.ReadFile(filepath.Join(dir, "snap_iter_100.caffemodel"))
	if err != nil {
		t.Fatal(err)
	}
	if _, format := invariant(t, "weights.bin", data); format != "generic" {
		t.Errorf("caffemodel bytes without hint: format %q, want generic", format)
	}
}

func TestCaffePlausibility(t *testing.T) {
	cases := []struct {
		kind caffeKind
		b    []byte
		ok   bool
	}{
		{caffeModel, []byte{0x0a, 0x05}, true},         // name
		{caffeModel, []byte{0xa2, 0x06, 0x10}, true},   // layer = 100
		{caffeModel, []byte{0x08, 0x01}, false},        // field 1 as a varint
		{caffeModel, []byte("PK\x03\x04"), false},      // field 10, wire 0
		{caffeSolver, []byte{0x08, 0x64, 0x12}, true},  // iter
		{caffeSolver, []byte{0x1a, 0x10}, true},        // history
		{caffeSolver, []byte{0x0a, 0x10}, false},       // field 1 length-delimited
		{caffeSolver, []byte{0xff, 0xff, 0xff}, false}, // a tag that does not end
	}
	for _, c := range cases {
		if got := caffePlausible(c.kind, c.b); got != c.ok {
			t.Errorf("caffePlausible(%d, % x) = %v", c.kind, c.b, got)
		}
	}
}

func TestCaffeMalformedFallsBack(t *testing.T) {
	// A layer (field 100) whose length runs past a blob's end, inside a
	// layer: framing breaks and the rest is labelled generically.
	b := []byte{0xa2, 0x06, 0x08, 0x3a, 0x10} // layer{len 8, blobs{len 16 > 6 left}}
	b = append(b, make([]byte, 32)...)
	spans, format := invariant(t, "x.caffemodel", b)
	if format != "caffe+generic" {
		t.Errorf("format %q, spans %v", format, spans)
	}
}

package detect

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
)

func TestSafetensorsGenerated(t *testing.T) {
	dir := t.TempDir()
	python(t, "gen_safetensors.py", dir)
	checkExpected(t, dir, readExpect(t, filepath.Join(dir, "expect-safetensors.json")))
}

// safetensorsBytes builds a file from a header string and n data bytes.
func safetensorsBytes(header string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

func TestSafetensorsFallbacks(t *testing.T) {
	cases := []struct {
		name, header string
		data         int
		format       string
		tensors      int
	}{
		{"bad json", `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}`, 4, "safetensors+generic", 0},
		{"bad offsets", `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}`, 8, "safetensors+generic", 0},
		{"overlap", `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}`, 8, "safetensors", 1},
		{"odd length", `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 6]}}`, 6, "safetensors", 1},
		{"empty header", `{}`, 10, "safetensors", 0},
	}
	for _, c := range cases {
		data := safetensorsBytes(c.header, c.data)
		spans, format := invariant(t, "x.safetensors", data)
		var n int
		for _, s := range spans {
			if s.Kind == Tensor && !strings.HasPrefix(s.Key, "generic/") {
				n++
				if c.name == "odd length" && s.DType.String() != "bytes" {
					t.Errorf("%s: dtype %v, want bytes (6 bytes are not whole float32s)", c.name, s.DType)
				}
			}
		}
		if format != c.format || n != c.tensors {
			t.Errorf("%s: format %q with %d tensors, want %q with %d", c.name, format, n, c.format, c.tensors)
		}
	}
	// A header longer than the cap is not buffered.
	big := safetensorsBytes(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}`+strings.Repeat(" ", safetensorsHeaderCap)+`}`, 4)
	if _, format := label(t, "big.safetensors", big, fixed(1<<16)); format != "safetensors+generic" {
		t.Errorf("oversized header: format %q", format)
	}
}

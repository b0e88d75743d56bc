package ckpttest

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestNpyFile: the magic, a header padded to 64 bytes that declares the
// length, and the values after it, little-endian.
func TestNpyFile(t *testing.T) {
	vals := []float32{1, -2.5, float32(math.Pi)}
	f := NpyFile(vals)
	if !strings.HasPrefix(string(f), "\x93NUMPY\x01\x00") {
		t.Fatalf("no .npy magic: %q", f[:8])
	}
	hlen := int(binary.LittleEndian.Uint16(f[8:10]))
	if (10+hlen)%64 != 0 {
		t.Errorf("header ends at %d, not a multiple of 64", 10+hlen)
	}
	if h := string(f[10 : 10+hlen]); !strings.Contains(h, "'shape': (3,)") || !strings.HasSuffix(h, "\n") {
		t.Errorf("header %q", h)
	}
	data := f[10+hlen:]
	if len(data) != 4*len(vals) {
		t.Fatalf("%d data bytes, want %d", len(data), 4*len(vals))
	}
	for i, v := range vals {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); got != v {
			t.Errorf("value %d: %v, want %v", i, got, v)
		}
	}
}

// TestTrainingSeries is deterministic by seed and drifts a little per
// version.
func TestTrainingSeries(t *testing.T) {
	a, b := TrainingSeries(7, 1000, 3), TrainingSeries(7, 1000, 3)
	if len(a) != 3 || len(a[0]) != 1000 {
		t.Fatalf("shape %dx%d", len(a), len(a[0]))
	}
	var moved int
	for v := range a {
		for i := range a[v] {
			if a[v][i] != b[v][i] {
				t.Fatalf("version %d differs between two calls with one seed", v)
			}
			if v > 0 {
				if d := math.Abs(float64(a[v][i] - a[v-1][i])); d > 1e-2 {
					t.Fatalf("version %d moved %v at %d: not a small drift", v, d, i)
				} else if d > 0 {
					moved++
				}
			}
		}
	}
	if moved < 1900 {
		t.Errorf("only %d of 2000 values moved between versions", moved)
	}
}

// TestSafetensorsFile: a JSON header padded to 8 bytes whose offsets
// address the tensors' bytes in order.
func TestSafetensorsFile(t *testing.T) {
	f := SafetensorsFile([]Tensor{{"a", []float32{1, 2}}, {"b.weight", []float32{3}}})
	n := binary.LittleEndian.Uint64(f)
	if n%8 != 0 {
		t.Errorf("header of %d bytes, not padded to 8", n)
	}
	var hdr map[string]struct {
		Dtype   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(f[8:8+n], &hdr); err != nil {
		t.Fatalf("header: %v", err)
	}
	data := f[8+n:]
	b := hdr["b.weight"]
	if b.Dtype != "F32" || b.Offsets != [2]int{8, 12} || len(data) != 12 {
		t.Fatalf("b.weight %+v, %d data bytes", b, len(data))
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(data[b.Offsets[0]:])); got != 3 {
		t.Errorf("b.weight reads %v, want 3", got)
	}
}

// TestParseTrace reads each kind of line and refuses one it does not know,
// naming its line number.
func TestParseTrace(t *testing.T) {
	ops, err := ParseTrace("mkdir in / ckpt\n\nwrite ckpt/a.pt [0, 4096)\nrename in ckpt a.tmp a.pt\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0].Op != "mkdir" || ops[0].Dir != "/" || ops[0].Name != "ckpt" ||
		ops[1].Op != "write" || ops[1].End != 4096 || ops[1].Line != 3 || ops[2].NewName != "a.pt" {
		t.Fatalf("ops %+v", ops)
	}
	if JoinPath(ops[0].Dir, ops[0].Name) != "ckpt" || JoinPath(ops[2].Dir, ops[2].NewName) != "ckpt/a.pt" {
		t.Errorf("JoinPath: %q, %q", JoinPath(ops[0].Dir, ops[0].Name), JoinPath(ops[2].Dir, ops[2].NewName))
	}
	if _, err := ParseTrace("mkdir in / a\nteleport in a b\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := ParseTrace("write a [9, 3)\n"); err == nil {
		t.Fatal("a write ending before it starts was accepted")
	}
}

package detect

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layoutWhileLabelling labels data in pieces from next and returns its final
// Layout. It fails unless the Layout was Known when the first Tensor span
// came back and stayed the same to the end (every format below declares all
// its tensors before the first one's bytes).
func layoutWhileLabelling(t *testing.T, name string, data []byte, next splitter) Layout {
	t.Helper()
	d := New(name)
	var spans []Span
	var first *Layout
	for len(data) > 0 {
		n := min(next(), len(data))
		spans = d.Label(spans[:0], data[:n])
		data = data[n:]
		if first != nil {
			continue
		}
		for _, s := range spans {
			if s.Kind == Tensor {
				l := d.Layout()
				if !l.Known() {
					t.Fatalf("%s: first tensor span %v came back with layout %+v", name, s, l)
				}
				first = &l
				break
			}
		}
	}
	if first == nil {
		t.Fatalf("%s: no tensor span", name)
	}
	if l := d.Layout(); l != *first {
		t.Fatalf("%s: layout %+v at the first tensor, %+v at the end", name, *first, l)
	}
	return *first
}

// TestLayoutFixtures: consecutive saves of one model by today's writers
// declare equal layouts, however the writes are split; different files of
// the series declare different ones.
func TestLayoutFixtures(t *testing.T) {
	groups := [][]string{
		{"hf/checkpoint-20/model.safetensors", "hf/checkpoint-30/model.safetensors", "hf/final/model.safetensors"},
		{"hf/checkpoint-20/optimizer.pt", "hf/checkpoint-30/optimizer.pt"},
		{"lightning/epoch=0-step=10.ckpt", "lightning/epoch=0-step=20.ckpt", "lightning/epoch=0-step=30.ckpt"},
		{"torch/ckpt_0010.pt", "torch/ckpt_0020.pt", "torch/ckpt_0030.pt"},
		{"safetensors_bf16/model-step10.safetensors", "safetensors_bf16/model-step20.safetensors", "safetensors_bf16/model-step30.safetensors"},
	}
	var seen []Layout
	for _, g := range groups {
		var want Layout
		for i, rel := range g {
			data := writerFixture(t, rel)
			l := layoutWhileLabelling(t, rel, data, whole())
			for seed := int64(1); seed <= 3; seed++ {
				if s := layoutWhileLabelling(t, rel, data, random(seed, 1<<uint(4*seed))); s != l {
					t.Fatalf("%s: layout %+v in random pieces (seed %d), %+v whole", rel, s, seed, l)
				}
			}
			t.Logf("%s: %d tensors declared, sum %#016x", rel, l.Tensors, l.Sum)
			if i == 0 {
				want = l
			} else if l != want {
				t.Errorf("%s: layout %+v, %s has %+v", rel, l, g[0], want)
			}
		}
		if slices.Contains(seen, want) {
			t.Errorf("%s: same layout as another group's", g[0])
		}
		seen = append(seen, want)
	}
}

// TestLayoutKeysAreSpanKeys: the layout hashes the keys, dtypes and lengths
// the spans carry. torch writes data/ members sorted as strings (0, 1, 10,
// 100, ...) but declares storages in pickle order, which is the numeric one.
func TestLayoutKeysAreSpanKeys(t *testing.T) {
	for _, rel := range []string{"hf/checkpoint-20/model.safetensors", "safetensors_bf16/model-step10.safetensors",
		"torch/ckpt_0010.pt", "hf/checkpoint-20/optimizer.pt", "lightning/epoch=0-step=10.ckpt"} {
		data := writerFixture(t, rel)
		d := New(rel)
		spans := Merge(nil, d.Label(nil, data))
		var ts []Span
		for _, s := range spans {
			if s.Kind == Tensor {
				ts = append(ts, s)
			}
		}
		if strings.HasSuffix(rel, ".pt") || strings.HasSuffix(rel, ".ckpt") {
			slices.SortStableFunc(ts, func(a, b Span) int { return storageNum(t, a.Key) - storageNum(t, b.Key) })
		}
		var s layoutSum
		for _, sp := range ts {
			s.add(sp.Label, sp.Length)
		}
		if got, want := d.Layout(), s.layout(); got != want {
			t.Errorf("%s: layout %+v, the spans make %+v", rel, got, want)
		}
	}
}

func storageNum(t *testing.T, key string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(key, "data/"))
	if err != nil {
		t.Fatalf("key %q is not data/<n>", key)
	}
	return n
}

// stFile writes a safetensors file of the given (name, dtype, shape) tensors.
func stFile(tensors ...any) []byte {
	h := map[string]any{}
	var at int
	for i := 0; i < len(tensors); i += 3 {
		dt := tensors[i+1].(string)
		n := tensors[i+2].(int) * map[string]int{"F32": 4, "F16": 2, "I64": 8}[dt]
		h[tensors[i].(string)] = map[string]any{"dtype": dt, "shape": []int{tensors[i+2].(int)}, "data_offsets": []int{at, at + n}}
		at += n
	}
	js, _ := json.Marshal(h)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(b, js...), make([]byte, at)...)
}

func layoutOf(t *testing.T, name string, data []byte) Layout {
	t.Helper()
	d := New(name)
	d.Label(nil, data)
	return d.Layout()
}

// TestLayoutSum pins the fingerprint, which is stored on disk: it is FNV-1a
// 64 over length-prefixed key, length-prefixed dtype name and byte length of
// each tensor, recomputed here without hash/fnv, and a known value.
func TestLayoutSum(t *testing.T) {
	base := stFile("a.weight", "F32", 3, "b", "F16", 5)
	got := layoutOf(t, "m.safetensors", base)
	h := uint64(14695981039346656037)
	put := func(b []byte) {
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	for _, x := range []struct {
		key, dt string
		n       uint64
	}{{"a.weight", "float32", 12}, {"b", "float16", 10}} {
		put(binary.LittleEndian.AppendUint64(nil, uint64(len(x.key))))
		put([]byte(x.key))
		put(binary.LittleEndian.AppendUint64(nil, uint64(len(x.dt))))
		put([]byte(x.dt))
		put(binary.LittleEndian.AppendUint64(nil, x.n))
	}
	const pinned = 0x4602fb56b8337cd9
	if got != (Layout{Sum: h, Tensors: 2}) || got.Sum != pinned {
		t.Fatalf("layout %+v (%#x), want sum %#x = %#x, 2 tensors", got, got.Sum, h, uint64(pinned))
	}
	// Another name, dtype or size is another layout.
	for _, other := range [][]byte{
		stFile("a.weight", "F32", 3, "c", "F16", 5),
		stFile("a.weight", "F32", 3, "b", "I64", 5),
		stFile("a.weight", "F32", 4, "b", "F16", 5),
		stFile("a.weight", "F32", 3),
	} {
		if l := layoutOf(t, "m.safetensors", other); !l.Known() || l == got {
			t.Errorf("layout %+v of a different file equals %+v", l, got)
		}
	}
}

func TestLayoutFormats(t *testing.T) {
	want := map[string]int{ // tensors declared; 0: unknown layout
		"ckpt-1.pt": -1, "legacy-1.pt": -1, "a-f32.npy": 1, "a-rec.npy": 1, "stored.npz": -1,
		"stream.npz": -1, "gaps.safetensors": -1, "snap_iter_100.caffemodel": 0,
	}
	for _, f := range goldenFiles(t) {
		n, ok := want[f.Name]
		if !ok {
			continue
		}
		delete(want, f.Name)
		data, err := os.ReadFile(filepath.Join(goldenDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		l := layoutOf(t, f.Name, data)
		switch {
		case n < 0 && l.Tensors < len(f.Tensors): // declared at least what is labelled
			t.Errorf("%s: %d tensors declared, %d labelled", f.Name, l.Tensors, len(f.Tensors))
		case n >= 0 && l.Tensors != n:
			t.Errorf("%s: %d tensors declared, want %d", f.Name, l.Tensors, n)
		}
	}
	if len(want) > 0 {
		t.Errorf("golden files missing: %v", want)
	}
	if l := layoutOf(t, "blob.dat", make([]byte, 1000)); l != (Layout{}) {
		t.Errorf("generic: %+v", l)
	}
	if l := layoutOf(t, "x.safetensors", stFile("a", "F32", 1)[:10]); l != (Layout{}) {
		t.Errorf("header not yet read: %+v", l)
	}
}

// TestLayoutDCP: a concatenation declares what its first archive declares.
func TestLayoutDCP(t *testing.T) {
	a0 := torchArchive(t, []uint32{3, 5}, "")
	alone := layoutOf(t, "x.pt", a0)
	cat := layoutOf(t, "__0_0.distcp", slices.Concat(a0, torchArchive(t, []uint32{7}, "")))
	other := layoutOf(t, "x.pt", torchArchive(t, []uint32{3, 6}, ""))
	if !alone.Known() || alone.Tensors != 2 || cat != alone || other == alone {
		t.Errorf("first archive %+v, concatenation %+v, other sizes %+v", alone, cat, other)
	}
	// The fixtures' first archive is a byte item without tensors: unknown.
	data := writerFixture(t, "dcp/step-10/__0_0.distcp")
	if l := layoutOf(t, "__0_0.distcp", data); l.Known() {
		t.Errorf("dcp fixture: %+v", l)
	}
}

package detect

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

const benchSize = 64 << 20

// synthTorchZip builds a torch-style zip of n float32 storages, 64 MiB in all.
func synthTorchZip(n int) []byte {
	each := uint32(benchSize / n / 4)
	p := pk{0x80, 2}.op('(')
	for i := 0; i < n; i++ {
		p = p.storagePid("FloatStorage", fmt.Sprint(i), each)
	}
	ms := []zmember{{name: "ckpt/data.pkl", data: p.op('t', '.'), desc: 16}}
	for i := 0; i < n; i++ {
		ms = append(ms, zmember{name: fmt.Sprintf("ckpt/data/%d", i), data: make([]byte, each*4), desc: 16})
	}
	b, _ := buildZip(ms)
	return b
}

func synthSafetensors(n int) []byte {
	each := benchSize / n
	h := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	for i := 0; i < n; i++ {
		h[fmt.Sprintf("layer.%d.weight", i)] = map[string]any{
			"dtype": "F32", "shape": []int{each / 4}, "data_offsets": []int{i * each, (i + 1) * each}}
	}
	js, _ := json.Marshal(h)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, make([]byte, benchSize)...)
}

func synthNpy() []byte {
	h := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", benchSize/4)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	b = append(b, h...)
	return append(b, make([]byte, benchSize)...)
}

func benchLabel(b *testing.B, name string, data []byte, piece int, wantFormat string) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var spans []Span
	var tensor int64
	for i := 0; i < b.N; i++ {
		d := New(name)
		tensor = 0
		for p := data; len(p) > 0; {
			n := min(piece, len(p))
			spans = d.Label(spans[:0], p[:n])
			for _, s := range spans {
				if s.Kind == Tensor {
					tensor += s.Length
				}
			}
			p = p[n:]
		}
		if d.Format() != wantFormat {
			b.Fatalf("format %q, want %q", d.Format(), wantFormat)
		}
	}
	b.ReportMetric(float64(tensor)/float64(len(data))*100, "%tensor")
}

func BenchmarkTorchZip(b *testing.B) {
	benchLabel(b, "ckpt-1.pt", synthTorchZip(64), 1<<20, "torch-zip")
}

func BenchmarkSafetensors(b *testing.B) {
	benchLabel(b, "model.safetensors", synthSafetensors(64), 1<<20, "safetensors")
}

func BenchmarkNpy(b *testing.B) {
	benchLabel(b, "w.npy", synthNpy(), 1<<20, "npy")
}

func BenchmarkGeneric(b *testing.B) {
	benchLabel(b, "w.bin", make([]byte, benchSize), 1<<20, "generic")
}

// BenchmarkTorchZipSmallWrites is the same archive in 4 KiB write()s, the
// size many writers use.
func BenchmarkTorchZipSmallWrites(b *testing.B) {
	benchLabel(b, "ckpt-1.pt", synthTorchZip(64), 4<<10, "torch-zip")
}

// BenchmarkSeries labels the real training checkpoints of `make series`.
func BenchmarkSeries(b *testing.B) {
	dir := seriesDir()
	files, _ := filepath.Glob(filepath.Join(dir, "adam", "ckpt-*.pt"))
	if len(files) == 0 {
		b.Skipf("SKIPPING: no series checkpoints under %s: run make series (or set CKPTFS_SERIES)", dir)
	}
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		b.Fatal(err)
	}
	benchLabel(b, filepath.Base(files[0]), data, 1<<20, "torch-zip")
}

// seriesDir is $CKPTFS_SERIES, or .cache/series beside go.mod.
func seriesDir() string {
	if d := os.Getenv("CKPTFS_SERIES"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "series")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

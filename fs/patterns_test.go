package fs

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage/memstore"
)

// patternSeries is two saves of a safetensors file of about 105 MB: float32
// weights, the second a small step from the first, as consecutive
// checkpoints are.
func patternSeries() [2][]byte {
	const tensors, elems = 5, 5_250_000
	rng := rand.New(rand.NewSource(27))
	names := make([]string, tensors)
	for i := range names {
		names[i] = fmt.Sprintf("layer.%d.weight", i)
	}
	header := safetensorsHeader(names, elems)
	head := len(header)
	var out [2][]byte
	for v := range out {
		out[v] = make([]byte, head+tensors*elems*4)
		copy(out[v], header)
	}
	for i := 0; i < tensors*elems; i++ {
		w := rng.NormFloat64() * 0.05
		binary.LittleEndian.PutUint32(out[0][head+4*i:], math.Float32bits(float32(w)))
		binary.LittleEndian.PutUint32(out[1][head+4*i:], math.Float32bits(float32(w+rng.NormFloat64()*1e-4)))
	}
	return out
}

// A write pattern saves data as name's new content, as some writer does.
type writePattern struct {
	name string
	save func(t *testing.T, m *testMount, name string, data []byte)
}

var writePatterns = []writePattern{
	{"sequential", func(t *testing.T, m *testMount, name string, data []byte) {
		writePieces(t, m.path(name), data)
	}},
	{"ftruncate-mmap", func(t *testing.T, m *testMount, name string, data []byte) {
		// Created under a temporary name, sized, renamed, then filled
		// through a shared mapping (mmap-based writers), in a child
		// process: the server's own process must not fault on its mount.
		mmapSaveInChild(t, m.path(name+".tmp"), m.path(name), data)
	}},
	{"out-of-order", func(t *testing.T, m *testMount, name string, data []byte) {
		f, err := os.OpenFile(m.path(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer closeT(t, f)
		const block = 4 << 20
		order := rand.New(rand.NewSource(1)).Perm((len(data) + block - 1) / block)
		for _, b := range order {
			off := b * block
			if _, err := f.WriteAt(data[off:min(off+block, len(data))], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"threads", func(t *testing.T, m *testMount, name string, data []byte) {
		// Four threads writing interleaved 1 MiB blocks at their offsets
		// (parallel-offset writers).
		f, err := os.OpenFile(m.path(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer closeT(t, f)
		const block, threads = 1 << 20, 4
		var wg sync.WaitGroup
		errs := make(chan error, threads)
		for k := 0; k < threads; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := k * block; off < len(data); off += threads * block {
					if _, err := f.WriteAt(data[off:min(off+block, len(data))], int64(off)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}},
	{"in-place", func(t *testing.T, m *testMount, name string, data []byte) {
		// The file rewritten where it stands: no O_TRUNC, the new bytes
		// written over the old in random order.
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer closeT(t, f)
		if err := f.Truncate(int64(len(data))); err != nil {
			t.Fatal(err)
		}
		const block = 3 << 20
		for _, b := range rand.New(rand.NewSource(2)).Perm((len(data) + block - 1) / block) {
			off := b * block
			if _, err := f.WriteAt(data[off:min(off+block, len(data))], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"random", func(t *testing.T, m *testMount, name string, data []byte) {
		// Overlapping writes of random sizes at random offsets (some of
		// them garbage, overwritten later), then every byte in order.
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer closeT(t, f)
		rng := rand.New(rand.NewSource(3))
		junk := randomBytes(4, 2<<20)
		for i := 0; i < 200; i++ {
			n := 1 + rng.Intn(len(junk))
			off := rng.Intn(len(data) - n)
			if _, err := f.WriteAt(junk[:n], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
		for off := 0; off < len(data); {
			n := min(1+rng.Intn(2<<20), len(data)-off)
			if _, err := f.WriteAt(data[off:off+n], int64(off)); err != nil {
				t.Fatal(err)
			}
			off += n
		}
	}},
}

func closeT(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWritePatterns (issue 27): a save written in any pattern (sequential,
// ftruncate then a shared mapping, out of order, several threads, in place,
// O_TRUNC then random overlapping writes) reads back byte for byte and is
// stored as a sequential save of the same bytes is: within 2% of its bytes
// on the device, for the baseline and for the delta after it. In both save
// modes.
func TestWritePatterns(t *testing.T) {
	series := patternSeries()
	for _, mode := range []struct {
		name          string
		daemonWritten bool
	}{{"passthrough", false}, {"daemon-written", true}} {
		t.Run(mode.name, func(t *testing.T) {
			stored := map[string][2]int64{}
			for _, p := range writePatterns {
				// Each pattern on a fresh store: the same history for all.
				m := newTestMountMode(t, memstore.New(4096, 1<<20), mode.daemonWritten)
				if !mode.daemonWritten && !m.fsys.PassthroughOn() {
					t.Log("!! the kernel refused FUSE passthrough here: this run writes staging files through the daemon")
				}
				name := "model.safetensors"
				var sizes [2]int64
				for v, data := range series {
					p.save(t, m, name, data)
					m.fsys.Drain()
					wantContent(t, m.path(name), data)
					n, err := strconv.ParseInt(xattr(t, m.path(name), "stored_bytes"), 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					sizes[v] = n
				}
				stored[p.name] = sizes
				m.stop()
			}
			seq := stored["sequential"]
			for _, p := range writePatterns {
				for v := range seq {
					got, want := stored[p.name][v], seq[v]
					if math.Abs(float64(got-want)) > 0.02*float64(want) {
						t.Errorf("%s, save %d: %d bytes stored, a sequential save of the same bytes %d", p.name, v, got, want)
					}
				}
				t.Logf("%s: stored %d then %d bytes of %d", p.name, stored[p.name][0], stored[p.name][1], len(series[0]))
			}
		})
	}
}

package chain

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/internal/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// Tests of how today's writers save (docs/REFERENCES.md): files sized
// first and filled out of order, renamed before their bytes arrive, rewritten
// in place, sharded. Each save must stream (no fallback) and be coded
// against its own predecessor.

// modelSeries is n saves of a safetensors model with the given tensor names.
func modelSeries(seed int64, names []string, elems, n int) [][]byte {
	series := make([][][]float32, len(names))
	for i := range names {
		series[i] = ckpttest.TrainingSeries(seed+int64(i), elems, n)
	}
	out := make([][]byte, n)
	for v := 0; v < n; v++ {
		ts := make([]ckpttest.Tensor, len(names))
		for i, name := range names {
			ts[i] = ckpttest.Tensor{Name: name, Vals: series[i][v]}
		}
		out[v] = ckpttest.SafetensorsFile(ts)
	}
	return out
}

// movingPath is a writer's path that a test renames.
type movingPath struct{ p atomic.Value }

func newMovingPath(p string) *movingPath { m := &movingPath{}; m.p.Store(p); return m }
func (m *movingPath) get() string        { return m.p.Load().(string) }
func (m *movingPath) set(p string)       { m.p.Store(p) }

func createFile(t *testing.T, s *Store, name string) meta.Ino {
	t.Helper()
	n, err := s.Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	return n.Ino
}

// mmapSave writes data the way safetensors' save_file does: size the file
// with a truncate, let the name change (the rename), then deliver the bytes
// as page writebacks that arrive shuffled within groups of pages, with the
// page faults' reads of not-yet-written pages in between.
func mmapSave(t *testing.T, s *Store, ino meta.Ino, path *movingPath, final string, data []byte, rng *rand.Rand) {
	t.Helper()
	w, err := s.NewWriter(ino, path.get, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(int64(len(data)), 1); err != nil {
		t.Fatal(err)
	}
	path.set(final)
	const page, group = 64 << 10, 8
	var offs []int
	for off := 0; off < len(data); off += page {
		offs = append(offs, off)
	}
	for g := 0; g < len(offs); g += group {
		batch := offs[g:min(len(offs), g+group)]
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, off := range batch {
			// The fault reads the page before it is written: zeros.
			got := make([]byte, min(page, len(data)-off))
			if _, err := w.ReadAt(got, int64(off)); err != nil {
				t.Fatalf("read ahead of the writes at %d: %v", off, err)
			}
			if _, err := w.WriteAt(data[off:min(len(data), off+page)], int64(off), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !w.Streamed() {
		t.Fatalf("%s: mmap-style save fell back to a draft", final)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func readIno(t *testing.T, s *Store, ino meta.Ino) []byte {
	t.Helper()
	n, err := s.Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenVersion(n.Version)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && r.Size() > 0 {
		if int64(len(out)) != r.Size() {
			t.Fatal(err)
		}
	}
	return out
}

func info(t *testing.T, s *Store, ino meta.Ino) *FileInfo {
	t.Helper()
	fi, err := s.Info(ino)
	if err != nil || fi == nil {
		t.Fatalf("info %d: %v", ino, err)
	}
	return fi
}

// TestMmapSaveStreamsAndFollowsRename: safetensors-style saves under a
// temporary name stream, land in the final name's family, and each is coded
// against the previous save.
func TestMmapSaveStreamsAndFollowsRename(t *testing.T) {
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100, MaxDepth: 100})
	defer ds.Close()
	s := ds.Store
	rng := rand.New(rand.NewSource(1))
	saves := modelSeries(7, []string{"wte", "h.0.attn", "h.0.mlp"}, 150_000, 3)
	var prev meta.VersionID
	for k, data := range saves {
		final := []string{"c-10/model.safetensors", "c-20/model.safetensors", "c-30/model.safetensors"}[k]
		tmp := []string{"c-10/.tmpAbC12", "c-20/.tmpQ9x0Z", "c-30/.tmp77kLm"}[k]
		ino := createFile(t, s, tmp[5:])
		mmapSave(t, s, ino, newMovingPath(tmp), final, data, rng)
		if got := readIno(t, s, ino); !bytes.Equal(got, data) {
			t.Fatalf("save %d: read back differs", k)
		}
		fi := info(t, s, ino)
		if fi.Ingest != "stream" || fi.Family != "c-#/model.safetensors" {
			t.Errorf("save %d: ingest %q family %q, want stream, c-#/model.safetensors", k, fi.Ingest, fi.Family)
		}
		if k > 0 && (fi.Reference != prev || fi.RefReason != meta.RefFamily || fi.Depth != uint32(k)) {
			t.Errorf("save %d: reference %d (%s) depth %d, want %d (family) depth %d", k, fi.Reference, fi.RefReason, fi.Depth, prev, k)
		}
		if k > 0 && fi.RefPath != []string{"", "c-10/model.safetensors", "c-20/model.safetensors"}[k] {
			t.Errorf("save %d: ref_path %q", k, fi.RefPath)
		}
		prev = fi.Version
	}
	mustCheck(t, s, true)
}

// TestInPlaceRewrite: last.pt rewritten (O_TRUNC) is coded against its own
// previous content.
func TestInPlaceRewrite(t *testing.T) {
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100, MaxDepth: 100})
	defer ds.Close()
	s := ds.Store
	series := ckpttest.TrainingSeries(3, 300_000, 3)
	ino := createFile(t, s, "last.pt")
	var prev meta.VersionID
	for k, vals := range series {
		data := ckpttest.NpyFile(vals)
		w, err := s.NewWriter(ino, pathIs("last.pt"), true)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 100_000 {
			if _, err := w.WriteAt(data[off:min(len(data), off+100_000)], int64(off), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := readIno(t, s, ino); !bytes.Equal(got, data) {
			t.Fatalf("save %d: read back differs", k)
		}
		fi := info(t, s, ino)
		if k > 0 && (fi.Reference != prev || fi.RefReason != meta.RefSameFile || fi.RefPath != "last.pt") {
			t.Errorf("save %d: reference %d (%s, %q), want %d (same-file, last.pt)", k, fi.Reference, fi.RefReason, fi.RefPath, prev)
		}
		prev = fi.Version
	}
	mustCheck(t, s, true)
}

// TestShardsFollowTheirOwnSeries: the second shard of a save is never coded
// against the first; each shard of the next save against the same shard.
func TestShardsFollowTheirOwnSeries(t *testing.T) {
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100, MaxDepth: 100})
	defer ds.Close()
	s := ds.Store
	series := ckpttest.TrainingSeries(5, 200_000, 2)
	versions := map[string]meta.VersionID{}
	for k := range series {
		for shard := 1; shard <= 2; shard++ {
			name := []string{"s-10", "s-20"}[k] + "/__" + string(rune('0'+shard-1)) + "_0.distcp"
			ino := createFile(t, s, name[5:]+string(rune('a'+k)))
			// Same shapes in every shard, as FSDP's ranks have.
			writeWith(t, s, ino, name, ckpttest.NpyFile(series[k]))
			fi := info(t, s, ino)
			if k == 0 && fi.Reference != 0 {
				t.Errorf("%s: coded against %q, a sibling shard of the same save", name, fi.RefPath)
			}
			if k == 1 {
				want := []string{"s-10", "s-20"}[0] + name[4:]
				if fi.RefPath != want || fi.Reference != versions[want] {
					t.Errorf("%s: reference %d %q, want %d %q", name, fi.Reference, fi.RefPath, versions[want], want)
				}
			}
			versions[name] = fi.Version
		}
	}
}

func writeWith(t *testing.T, s *Store, ino meta.Ino, path string, data []byte) {
	t.Helper()
	w, err := s.NewWriter(ino, pathIs(path), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(data, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestWindowFallbacks: writes below what was streamed, reads of it, and a
// window that overflows end streaming; the content stays exact and the
// version says it took the fallback.
func TestWindowFallbacks(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	data := ckpttest.NpyFile(ckpttest.TrainingSeries(1, 400_000, 1)[0])
	for _, tc := range []struct {
		name string
		do   func(w *Writer) error
	}{
		{"rewrite-below", func(w *Writer) error {
			if _, err := w.WriteAt(data, 0, 1); err != nil {
				return err
			}
			_, err := w.WriteAt(data[1000:2000], 1000, 1)
			return err
		}},
		{"read-below", func(w *Writer) error {
			if _, err := w.WriteAt(data, 0, 1); err != nil {
				return err
			}
			_, err := w.ReadAt(make([]byte, 10), 5)
			return err
		}},
		{"too-many-extents", func(w *Writer) error {
			// Every other 512-byte block first (more extents than
			// maxWindowExtents), then the rest.
			for pass := 1; pass >= 0; pass-- {
				for off := pass * 512; off < len(data); off += 1024 {
					if _, err := w.WriteAt(data[off:min(len(data), off+512)], int64(off), 1); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		{"shrink-below", func(w *Writer) error {
			if _, err := w.WriteAt(data, 0, 1); err != nil {
				return err
			}
			if err := w.Truncate(100, 1); err != nil {
				return err
			}
			_, err := w.WriteAt(data[100:], 100, 1)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ino := createFile(t, s, tc.name)
			w, err := s.NewWriter(ino, pathIs(tc.name), true)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.do(w); err != nil {
				t.Fatal(err)
			}
			if w.Streamed() {
				t.Fatalf("still streaming")
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := readIno(t, s, ino); !bytes.Equal(got, data) {
				t.Fatalf("read back differs")
			}
			if fi := info(t, s, ino); fi.Ingest != "fallback" {
				t.Errorf("ingest %q, want fallback", fi.Ingest)
			}
		})
	}
	mustCheck(t, s, true)
}

// TestSparseWindow: bytes never written between and after the window's
// extents are zeros, and a shrink that cuts only the window keeps
// streaming.
func TestSparseWindow(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	ino := createFile(t, s, "sparse")
	w, err := s.NewWriter(ino, pathIs("sparse"), true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 3<<20)
	put := func(off int, b []byte) {
		if _, err := w.WriteAt(b, int64(off), 1); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], b)
	}
	if err := w.Truncate(int64(len(want)), 1); err != nil {
		t.Fatal(err)
	}
	put(2<<20, bytes.Repeat([]byte{7}, 5000))
	put(1<<20, bytes.Repeat([]byte{9}, 5000))
	put(1<<20+2000, bytes.Repeat([]byte{3}, 10)) // overwrites part of the window
	put(0, []byte("head"))
	got := make([]byte, 8000)
	if _, err := w.ReadAt(got, 1<<20-1000); err != nil || !bytes.Equal(got, want[1<<20-1000:1<<20+7000]) {
		t.Fatalf("read of the window: %v", err)
	}
	if err := w.Truncate(2<<20+100, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(3<<20, 1); err != nil {
		t.Fatal(err)
	}
	clear(want[2<<20+100:])
	if !w.Streamed() {
		t.Fatal("fell back")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readIno(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
}

// TestRecoverFreesInterruptedRelease: a version released while an ingest
// pinned it is freed when the pin goes; a crash in between leaves it neither
// live nor needed, and the next open frees it (fsck found the leak in a
// SIGKILL test once saves pinned their own previous content).
func TestRecoverFreesInterruptedRelease(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	series := ckpttest.TrainingSeries(2, 100_000, 1)
	ino := writeFile(t, s, "a.npy", ckpttest.NpyFile(series[0]), 1<<16)
	n, err := s.Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	s.pin(n.Version)
	if err := s.Unlink(meta.RootIno, "a.npy", nil); err != nil {
		t.Fatal(err)
	}
	// The crash: the process and its pins are gone.
	s.pinMu.Lock()
	s.pins, s.deferred = map[meta.VersionID]int{}, map[meta.VersionID]bool{}
	s.pinMu.Unlock()
	if rep, _ := s.Check(false); !hasProblem(rep, "leak") {
		t.Fatalf("no leak to recover: %v", rep.Problems)
	}
	if freed, err := s.freeUnneeded(); err != nil || freed != 1 {
		t.Fatalf("freeUnneeded = %d, %v; want 1", freed, err)
	}
	mustCheck(t, s, true)
}

// TestDirtyMemoryBoundedForAllWriters: many files changed out of order at
// once keep no more than the store's bound in memory together (24 drafts
// took 64 MiB each before), windows included, and every file reads back
// exact; after the commits nothing is held.
func TestDirtyMemoryBoundedForAllWriters(t *testing.T) {
	dir := t.TempDir()
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20, DirtyBytes: 4 << 20},
		Device: smallDevice(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	s := ds.Store
	const files, size = 12, 1 << 20
	rng := rand.New(rand.NewSource(3))
	want := make([][]byte, files)
	writers := make([]*Writer, files)
	inos := make([]meta.Ino, files)
	for i := range writers {
		want[i] = randomBytes(rng, size)
		inos[i] = createFile(t, s, fmt.Sprintf("f%d", i))
		w, err := s.NewWriter(inos[i], pathIs(fmt.Sprintf("f%d", i)), true)
		if err != nil {
			t.Fatal(err)
		}
		writers[i] = w
	}
	// Half the files get their second half first (a window), the others
	// scattered pages (drafts); all interleaved.
	const piece = 8 << 10
	for off := 0; off < size; off += piece {
		for i, w := range writers {
			o := off
			if i%2 == 0 {
				o = (off + size/2) % size
			} else {
				o = (off * 7919) % size / piece * piece
			}
			if _, err := w.WriteAt(want[i][o:o+piece], int64(o), 1); err != nil {
				t.Fatal(err)
			}
			if held := s.DirtyBytes(); held > 4<<20+piece {
				t.Fatalf("%d bytes held in memory, bound %d", held, 4<<20)
			}
		}
	}
	// The scattered writes left gaps: fill every page to know the content.
	for i, w := range writers {
		if _, err := w.WriteAt(want[i], 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if held := s.DirtyBytes(); held != 0 {
		t.Errorf("%d bytes still held after every commit", held)
	}
	for i := range writers {
		if got := readIno(t, s, inos[i]); !bytes.Equal(got, want[i]) {
			t.Fatalf("f%d: read back differs", i)
		}
	}
	mustCheck(t, s, true)
}

// TestSparseSaveShadow: a plain filesystem writes only the pages a program
// wrote; a file sized by a truncate and left (partly) unwritten is a hole
// there. The shadow must not be charged for those zeros (it was, once a
// truncate that grows a streaming file only set its size), or the saving
// would look larger than it is.
func TestSparseSaveShadow(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	shadowPages := func() int64 { return ds.Shadow.Stats().HostPagesWritten }
	for _, tc := range []struct {
		name     string
		writes   []int64 // offsets of one 4 KiB page each
		size     int64
		minPages int64 // data pages a plain filesystem writes
	}{
		{"hole", nil, 64 << 20, 0},
		{"two-pages", []int64{0, 8 << 20}, 16 << 20, 2},
	} {
		ino := createFile(t, s, tc.name)
		before := shadowPages()
		w, err := s.NewWriter(ino, pathIs(tc.name), false)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Truncate(tc.size, 1); err != nil {
			t.Fatal(err)
		}
		for _, off := range tc.writes {
			if _, err := w.WriteAt(bytes.Repeat([]byte{1}, 4096), off, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		// The metadata estimate adds a page or two per change.
		if got := shadowPages() - before; got < tc.minPages || got > tc.minPages+4 {
			t.Errorf("%s: the shadow wrote %d pages, want %d data pages (and a few of metadata)", tc.name, got, tc.minPages)
		}
		if fi := info(t, s, ino); fi.Ingest != "stream" {
			t.Errorf("%s: ingest %q", tc.name, fi.Ingest)
		}
	}
	mustCheck(t, s, false)
}

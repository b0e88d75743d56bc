package chain

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// Tests of how today's writers save (docs/REFERENCES.md): files sized
// first and filled out of order (in their staging file), renamed before
// their commit, rewritten in place, sharded. Each save must be coded
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

func createFile(t *testing.T, s *Store, name string) meta.Ino {
	t.Helper()
	n, err := s.Names().Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	return n.Ino
}

// mmapSave saves data the way safetensors' save_file does into a mount:
// the file is sized with a truncate, and its bytes arrive as page
// writebacks shuffled within groups of pages, all into its staging file;
// the commit is queued at close under the temporary name tmp and runs after
// the rename to final, which names its family.
func mmapSave(t *testing.T, s *Store, ino meta.Ino, tmp, final string, data []byte, rng *rand.Rand) {
	t.Helper()
	f := stagedFile(t, int64(len(data)), nil)
	const page, group = 64 << 10, 8
	var offs []int
	for off := 0; off < len(data); off += page {
		offs = append(offs, off)
	}
	for g := 0; g < len(offs); g += group {
		batch := offs[g:min(len(offs), g+group)]
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, off := range batch {
			if _, err := f.WriteAt(data[off:min(len(data), off+page)], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := s.BeginCommitFile(ino, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(f, final, 1); err != nil {
		t.Fatal(err)
	}
}

func readIno(t *testing.T, s *Store, ino meta.Ino) []byte {
	t.Helper()
	n, err := s.Names().Inode(ino)
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
// temporary name stream, land in the final name's family (the name at the
// commit, not the one it was queued under), and each is coded against the
// previous save.
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
		mmapSave(t, s, ino, tmp, final, data, rng)
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
		w, err := s.NewWriter(ino, pathIs("last.pt"))
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
	w, err := s.NewWriter(ino, pathIs(path))
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

// TestWriteBelowFails: a writer takes its file in order; a write below the
// bytes it accepted fails with ErrNotSequential and changes nothing, a
// write past them leaves a hole, and a finished writer takes nothing. The
// file keeps its previous content until a commit.
func TestWriteBelowFails(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	data := ckpttest.NpyFile(ckpttest.TrainingSeries(1, 400_000, 1)[0])
	old := []byte("previous content")
	ino := writeFile(t, s, "f.npy", old, 4)
	w, err := s.NewWriter(ino, pathIs("f.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(data[:100_000], 0, 1); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 1000, 99_999} {
		n, err := w.WriteAt(data[off:off+10], off, 1)
		if n != 0 || !errors.Is(err, ErrNotSequential) || !strings.Contains(err.Error(), "f.npy") {
			t.Errorf("write at %d below 100000: %d, %v; want 0, ErrNotSequential naming the file", off, n, err)
		}
	}
	if got := w.Size(); got != 100_000 {
		t.Errorf("size %d after the failed writes, want 100000", got)
	}
	if got := readFile(t, s, "f.npy"); !bytes.Equal(got, old) {
		t.Error("an uncommitted writer changed the file")
	}
	want := append([]byte(nil), data...)
	clear(want[100_000:150_000])
	if _, err := w.WriteAt(data[150_000:], 150_000, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "f.npy"); !bytes.Equal(got, want) {
		t.Error("read back differs")
	}
	if _, err := w.WriteAt(data[:10], int64(len(data)), 1); err == nil {
		t.Error("a committed writer took a write")
	}
	if err := w.Commit(); err == nil {
		t.Error("a writer committed twice")
	}
	w.Abort() // nothing left to drop
	mustCheck(t, s, true)
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
	n, err := s.Names().Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	s.pin(n.Version)
	if err := s.Names().Unlink(meta.RootIno, "a.npy", nil); err != nil {
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

// TestSparseSaveShadow: a plain filesystem writes only the pages a program
// wrote; a file sized by a truncate and left (partly) unwritten is a hole
// there. The shadow must not be charged for those zeros (it was, once a
// truncate that grows a streaming file only set its size), or the saving
// would look larger than it is. The holes reach the writer as skipped
// bytes and a last Extend, as FileCommit.Run feeds a sparse staging file.
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
		w, err := s.NewWriter(ino, pathIs(tc.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range tc.writes {
			if _, err := w.WriteAt(bytes.Repeat([]byte{1}, 4096), off, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Extend(tc.size, 1); err != nil {
			t.Fatal(err)
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

// TestAppendedSaveShadow: a save that appends to the file's content (a log
// opened with O_APPEND) costs a plain filesystem the pages from the one
// holding the old end on, not the whole file: Writer.Appended charges the
// shadow those. Without it the shadow counts a rewrite of the whole file
// at every commit, and the saving on a log looks larger than it is.
func TestAppendedSaveShadow(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	shadowPages := func() int64 { return ds.Shadow.Stats().HostPagesWritten }
	ino := createFile(t, s, "train.log")
	log := bytes.Repeat([]byte("step 1 loss 0.5\n"), 64<<10) // 1 MiB, 256 pages
	commit := func(data []byte, appendedTo int64) int64 {
		t.Helper()
		before := shadowPages()
		w, err := s.NewWriter(ino, pathIs("train.log"))
		if err != nil {
			t.Fatal(err)
		}
		if appendedTo >= 0 {
			w.Appended(appendedTo)
		}
		if _, err := w.WriteAt(data, 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return shadowPages() - before
	}
	if got := commit(log, -1); got < 256 || got > 260 {
		t.Fatalf("the first save wrote %d shadow pages, want 256 (and a few of metadata)", got)
	}
	grown := append(append([]byte{}, log...), bytes.Repeat([]byte("step 2 loss 0.4\n"), 512)...) // 2 pages more
	if got := commit(grown, int64(len(log))); got < 2 || got > 6 {
		t.Errorf("an append of 2 pages wrote %d shadow pages, want 2 (and a few of metadata)", got)
	}
	if got := commit(grown, -1); got < 258 {
		t.Errorf("a rewrite wrote %d shadow pages, want the whole file's 258", got)
	}
	if got := readFile(t, s, "train.log"); !bytes.Equal(got, grown) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(grown))
	}
	mustCheck(t, s, true)
}

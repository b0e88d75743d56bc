package chain

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

func TestRoundTripEveryCodec(t *testing.T) {
	series := ckpttest.TrainingSeries(1, 100_000, 4)
	copy(series[2][:6], floatsNaNInf())
	for _, c := range encode.Codecs() {
		t.Run(c.String(), func(t *testing.T) {
			p := policy.Default()
			p.Codec, p.SnapDis = c, 3
			ds := openTestStore(t, "", p)
			defer ds.Close()
			var files [][]byte
			for i, w := range series {
				files = append(files, ckpttest.NpyFile(w))
				writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), files[i], 100_003)
			}
			for i := range files {
				if got := readFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i)); !bytes.Equal(got, files[i]) {
					t.Fatalf("ckpt-%d: read back differs", i)
				}
			}
			mustCheck(t, ds.Store, true)
		})
	}
}

func TestDeltasShrinkDriftingWeights(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	series := ckpttest.TrainingSeries(2, 200_000, 3)
	for i, w := range series {
		writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), ckpttest.NpyFile(w), 1<<20)
	}
	var infos []*FileInfo
	for i := range series {
		n, _ := ds.Names().Lookup(meta.RootIno, fmt.Sprintf("ckpt-%d.npy", i))
		info, err := ds.Info(n.Ino)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if infos[0].Reference != 0 || infos[1].Reference != infos[0].Version || infos[2].Depth != 2 {
		t.Fatalf("progressive chain not built: %+v %+v %+v", infos[0], infos[1], infos[2])
	}
	if infos[0].Format != "npy" {
		t.Errorf("detector format %q, want npy", infos[0].Format)
	}
	if float64(infos[1].StoredBytes) > 0.8*float64(infos[0].StoredBytes) {
		t.Fatalf("delta %d bytes not clearly smaller than baseline %d", infos[1].StoredBytes, infos[0].StoredBytes)
	}
}

// TestSchemesAndDeletionOrders saves a series under every scheme and
// snap_dis, then deletes it in several orders, checking after every step
// that the remaining files read back exactly and fsck finds nothing; at
// the end every page is free again.
func TestSchemesAndDeletionOrders(t *testing.T) {
	const n = 7
	series := ckpttest.TrainingSeries(3, 40_000, n)
	files := make([][]byte, n)
	for i := range series {
		files[i] = ckpttest.NpyFile(series[i])
	}
	orders := map[string][]int{
		"oldest-first": {0, 1, 2, 3, 4, 5, 6},
		"newest-first": {6, 5, 4, 3, 2, 1, 0},
		"middle-first": {3, 2, 4, 1, 5, 0, 6},
		"shuffled":     rand.New(rand.NewSource(9)).Perm(n),
	}
	for _, scheme := range []policy.Scheme{policy.Progressive, policy.ChainScheme} {
		for _, sd := range []int{1, 3, policy.SnapDisAuto} {
			for oname, order := range orders {
				name := fmt.Sprintf("%s/snapdis=%s/%s", scheme, policy.FormatSnapDis(sd), oname)
				t.Run(name, func(t *testing.T) {
					p := policy.Default()
					p.Scheme, p.SnapDis, p.MaxDepth = scheme, sd, 4
					ds := openTestStore(t, "", p)
					defer ds.Close()
					total := freeBlocks(ds.Store)
					for i := range files {
						writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), files[i], 65536)
					}
					mustCheck(t, ds.Store, true)
					alive := map[int]bool{}
					for i := range files {
						alive[i] = true
					}
					for _, victim := range order {
						if err := ds.Names().Unlink(meta.RootIno, fmt.Sprintf("ckpt-%d.npy", victim), nil); err != nil {
							t.Fatal(err)
						}
						delete(alive, victim)
						for i := range alive {
							if !bytes.Equal(readFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i)), files[i]) {
								t.Fatalf("after deleting %d: ckpt-%d differs", victim, i)
							}
						}
						mustCheck(t, ds.Store, false)
					}
					if got := freeBlocks(ds.Store); got != total {
						t.Fatalf("after deleting everything %d pages free, want %d", got, total)
					}
					if st := ds.Dev.Stats(); st.ValidPages > ds.MetaPages {
						t.Fatalf("device still holds %d valid pages outside metadata", st.ValidPages-ds.MetaPages)
					}
				})
			}
		}
	}
}

func TestFixedSnapDisBaselines(t *testing.T) {
	p := policy.Default()
	p.SnapDis = 3
	ds := openTestStore(t, "", p)
	defer ds.Close()
	series := ckpttest.TrainingSeries(4, 20_000, 7)
	var refs []meta.VersionID
	var depths []uint32
	for i, w := range series {
		ino := writeFile(t, ds.Store, fmt.Sprintf("snapshot_iter_%d.npy", (i+1)*1000), ckpttest.NpyFile(w), 1<<20)
		info, _ := ds.Info(ino)
		refs = append(refs, info.Reference)
		depths = append(depths, info.Depth)
	}
	// snap_dis 3: baseline, delta, delta, baseline, ... (Algorithm 2)
	want := []uint32{0, 1, 2, 0, 1, 2, 0}
	for i := range want {
		if depths[i] != want[i] {
			t.Fatalf("depths %v, want %v", depths, want)
		}
	}
}

func TestChainSchemeDeltasAgainstBaseline(t *testing.T) {
	p := policy.Default()
	p.Scheme, p.SnapDis = policy.ChainScheme, 4
	ds := openTestStore(t, "", p)
	defer ds.Close()
	var base meta.VersionID
	for i, w := range ckpttest.TrainingSeries(5, 20_000, 4) {
		ino := writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), ckpttest.NpyFile(w), 1<<20)
		info, _ := ds.Info(ino)
		if i == 0 {
			base = info.Version
			continue
		}
		if info.Reference != base || info.Depth != 1 {
			t.Fatalf("version %d: reference %d depth %d, want %d and 1", i, info.Reference, info.Depth, base)
		}
	}
}

// TestRewriteSamePath saves over one path repeatedly: old versions stay as
// hidden bases while needed, and are freed after a new baseline.
func TestRewriteSamePath(t *testing.T) {
	p := policy.Default()
	p.SnapDis = 3
	ds := openTestStore(t, "", p)
	defer ds.Close()
	series := ckpttest.TrainingSeries(6, 30_000, 7)
	for i, w := range series {
		data := ckpttest.NpyFile(w)
		writeFile(t, ds.Store, "latest.npy", data, 4096)
		if !bytes.Equal(readFile(t, ds.Store, "latest.npy"), data) {
			t.Fatalf("rewrite %d: read back differs", i)
		}
		rep := mustCheck(t, ds.Store, false)
		// Versions kept: the live one plus the bases of its group.
		if rep.Versions > 3 {
			t.Fatalf("rewrite %d keeps %d versions, want at most snap_dis=3", i, rep.Versions)
		}
	}
}

func TestEmptyFileHasNoVersion(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	ino := writeFile(t, ds.Store, "e.pt", nil, 1)
	n, _ := ds.Names().Inode(ino)
	if n.Size != 0 || n.Version != 0 {
		t.Fatalf("empty file: %+v", n)
	}
	writeFile(t, ds.Store, "e.pt", []byte("x"), 1)
	writeFile(t, ds.Store, "e.pt", nil, 1)
	if got := readFile(t, ds.Store, "e.pt"); len(got) != 0 {
		t.Fatalf("emptied file reads %q", got)
	}
	mustCheck(t, ds.Store, true)
}

// TestStagedModel drives one file's staging file with random writes
// (anywhere, sometimes far past the end) and truncates, commits it at
// random moments through CommitFile, and compares the committed content
// with a byte slice after every commit: whatever order the bytes were
// written in, the store keeps exactly them.
func TestStagedModel(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	rng := rand.New(rand.NewSource(7))
	n, err := ds.Names().Create(meta.RootIno, "f.bin", NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	var model []byte
	var f *os.File // the staging file, nil between saves
	steps := 400
	if testing.Short() {
		steps = 100
	}
	commit := func(step int) {
		if err := ds.CommitFile(n.Ino, "f.bin", f, 1); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		f = nil
		if got := readFile(t, ds.Store, "f.bin"); !bytes.Equal(got, model) {
			t.Fatalf("step %d: committed content differs (%d vs %d bytes)", step, len(got), len(model))
		}
	}
	for step := 0; step < steps; step++ {
		if f == nil {
			// A new save: O_TRUNC, or the committed content copied in.
			if rng.Intn(5) == 0 {
				model = model[:0]
			}
			f = stagedFile(t, int64(len(model)), map[int64][]byte{0: model})
		}
		switch op := rng.Intn(10); {
		case op < 5: // write somewhere, sometimes far past the end
			off := int64(rng.Intn(len(model) + 1))
			if rng.Intn(8) == 0 {
				off += int64(rng.Intn(100_000))
			}
			data := randomBytes(rng, 1+rng.Intn(20_000))
			if _, err := f.WriteAt(data, off); err != nil {
				t.Fatal(err)
			}
			if end := off + int64(len(data)); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], data)
		case op < 6: // append
			data := randomBytes(rng, rng.Intn(300_000))
			if _, err := f.WriteAt(data, int64(len(model))); err != nil {
				t.Fatal(err)
			}
			model = append(model, data...)
		case op < 8:
			size := int64(rng.Intn(len(model) + 50_000))
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			if size < int64(len(model)) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-int64(len(model)))...)
			}
		default:
			commit(step)
		}
	}
	if f != nil {
		commit(steps)
	}
	mustCheck(t, ds.Store, true)
}

func TestNamespace(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	dir, err := s.Names().Create(meta.RootIno, "d", NewNode{Mode: syscall.S_IFDIR | 0o755})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, s, "a", []byte("aaa"), 2)
	writeFile(t, s, "b", []byte("bbbb"), 2)
	if _, err := s.Names().Create(meta.RootIno, "a", NewNode{Mode: syscall.S_IFREG}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("create existing: %v", err)
	}
	// Rename over an existing file replaces it atomically.
	if err := s.Names().Rename(meta.RootIno, "a", meta.RootIno, "b", 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "b"); string(got) != "aaa" {
		t.Fatalf("after rename-over b = %q", got)
	}
	if _, err := s.Names().Lookup(meta.RootIno, "a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("old name still there: %v", err)
	}
	if err := s.Names().Rename(meta.RootIno, "b", dir.Ino, "c", RenameNoReplace, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s, "x", []byte("x"), 1)
	if err := s.Names().Rename(meta.RootIno, "x", dir.Ino, "c", RenameNoReplace, nil); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("noreplace: %v", err)
	}
	if err := s.Names().Rename(meta.RootIno, "x", dir.Ino, "c", RenameExchange, nil); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "x"); string(got) != "aaa" {
		t.Fatalf("after exchange x = %q", got)
	}
	if err := s.Names().Rmdir(meta.RootIno, "d", nil); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if err := s.Names().Rename(meta.RootIno, "d", dir.Ino, "inside", 0, nil); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("move dir into itself: %v", err)
	}
	// Hard link, then unlink while "open": the inode lives until Forget.
	n, _ := s.Names().Lookup(meta.RootIno, "x")
	if _, err := s.Names().Link(n.Ino, meta.RootIno, "x2"); err != nil {
		t.Fatal(err)
	}
	open := func(ino meta.Ino) bool { return ino == n.Ino }
	if err := s.Names().Unlink(meta.RootIno, "x", open); err != nil {
		t.Fatal(err)
	}
	if err := s.Names().Unlink(meta.RootIno, "x2", open); err != nil {
		t.Fatal(err)
	}
	if in, err := s.Names().Inode(n.Ino); err != nil || in.Nlink != 0 {
		t.Fatalf("open unlinked inode: %+v %v", in, err)
	}
	mustCheck(t, s, true)
	if err := s.Names().Forget(n.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Names().Inode(n.Ino); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("forgotten orphan still there: %v", err)
	}
	ents, _ := s.Names().ReadDir(dir.Ino)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[c]" {
		t.Fatalf("dir lists %v", names)
	}
	mustCheck(t, s, true)
}

func TestOutOfSpaceThenRecover(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	rng := rand.New(rand.NewSource(8))
	first := randomBytes(rng, 1<<20)
	writeFile(t, ds.Store, "keep", first, 1<<16)
	var names []string
	var failed error
	for i := 0; i < 100 && failed == nil; i++ {
		name := fmt.Sprintf("fill-%d", i)
		n, err := ds.Names().Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := ds.NewWriter(n.Ino, pathIs(name))
		for off := 0; off < 4<<20 && failed == nil; off += 1 << 20 {
			_, failed = w.WriteAt(randomBytes(rng, 1<<20), int64(off), 1)
		}
		if failed == nil {
			failed = w.Commit()
		} else {
			w.Abort()
		}
		names = append(names, name)
	}
	if !errors.Is(failed, meta.ErrNoSpace) {
		t.Fatalf("filling the device: %v, want ErrNoSpace", failed)
	}
	if !bytes.Equal(readFile(t, ds.Store, "keep"), first) {
		t.Fatal("full device damaged an earlier file")
	}
	mustCheck(t, ds.Store, false)
	for _, name := range names {
		if err := ds.Names().Unlink(meta.RootIno, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, ds.Store, "after", randomBytes(rng, 4<<20), 1<<20)
	mustCheck(t, ds.Store, true)
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	ds := openTestStore(t, dir, policy.Default())
	series := ckpttest.TrainingSeries(10, 50_000, 3)
	for i, w := range series {
		writeFile(t, ds.Store, fmt.Sprintf("c-%d.npy", i), ckpttest.NpyFile(w), 1<<20)
	}
	written := ds.Dev.Stats().HostPagesWritten
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	ds = openTestStore(t, dir, policy.Default())
	defer ds.Close()
	if !ds.Dev.StateRestored() {
		t.Fatal("device state not restored after a clean close")
	}
	if got := ds.Dev.Stats().HostPagesWritten; got < written {
		t.Fatalf("device counters went back from %d to %d", written, got)
	}
	for i, w := range series {
		if !bytes.Equal(readFile(t, ds.Store, fmt.Sprintf("c-%d.npy", i)), ckpttest.NpyFile(w)) {
			t.Fatalf("c-%d differs after reopen", i)
		}
	}
	// The family carries on across the restart.
	ino := writeFile(t, ds.Store, "c-3.npy", ckpttest.NpyFile(ckpttest.TrainingSeries(10, 50_000, 4)[3]), 1<<20)
	if info, _ := ds.Info(ino); info.Reference == 0 {
		t.Fatal("first save after reopen did not delta against the family")
	}
	mustCheck(t, ds.Store, true)
}

// TestSyncDataLeavesStatistics: fsync (SyncData) makes data durable without
// saving the simulators' FTL state, which is tens of MB on a full-size
// device and only statistics; Sync saves it.
func TestSyncDataLeavesStatistics(t *testing.T) {
	dir := t.TempDir()
	ds := openTestStore(t, dir, policy.Default())
	defer ds.Close()
	state := filepath.Join(dir, DeviceStateFile)
	writeFile(t, ds.Store, "a.npy", ckpttest.NpyFile(ckpttest.TrainingSeries(1, 10_000, 1)[0]), 1<<16)
	if err := ds.SyncData(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("SyncData wrote the FTL state (%v)", err)
	}
	if err := ds.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("Sync did not save the FTL state: %v", err)
	}
}

func freeBlocks(s *Store) int64 {
	_, free := s.data.Space()
	return free
}

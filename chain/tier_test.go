package chain

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/nandsim"
)

// TestSecondSaveNeedsNoRebuild: a checkpoint that fits in the reference
// tier is coded against the previous one without rebuilding it through
// the delta chain.
func TestSecondSaveNeedsNoRebuild(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	series := ckpttest.TrainingSeries(21, 200_000, 3)
	for i, w := range series {
		_, missesBefore, _ := ds.cache.Stats()
		hitsBefore := ds.refs.Hits()
		writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), ckpttest.NpyFile(w), 1<<20)
		_, misses, _ := ds.cache.Stats()
		if i == 0 {
			continue
		}
		if misses != missesBefore {
			t.Errorf("save %d rebuilt %d reference chunks", i, misses-missesBefore)
		}
		if ds.refs.Hits()-hitsBefore < 3 { // 800 kB of float32: 4 chunks of 256 KiB
			t.Errorf("save %d took only %d references from the tier", i, ds.refs.Hits()-hitsBefore)
		}
	}
	mustCheck(t, ds.Store, true)
}

// TestReadBackFromTier: the checkpoint just saved is read from the
// reference tier, byte for byte, without rebuilding a chunk through the
// delta chain; once the next save has taken its chunks, reads rebuild.
func TestReadBackFromTier(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	series := ckpttest.TrainingSeries(22, 200_000, 3)
	for i, w := range series {
		name := fmt.Sprintf("ckpt-%d.npy", i)
		want := ckpttest.NpyFile(w)
		writeFile(t, ds.Store, name, want, 1<<20)
		_, missesBefore, _ := ds.cache.Stats()
		if got := readFile(t, ds.Store, name); !bytes.Equal(got, want) {
			t.Fatalf("%s read back differs", name)
		}
		// The npy header is a raw chunk, never in the tier: at most one
		// rebuild per read.
		if _, misses, _ := ds.cache.Stats(); misses-missesBefore > 1 {
			t.Errorf("reading back %s rebuilt %d chunks", name, misses-missesBefore)
		}
		// A read-ahead goroutine that starts late (a busy machine) claims
		// chunks after the read returned: once the next save took them
		// from the tier, it would rebuild them inside the next count.
		waitReadAheadDone(t)
	}
	// ckpt-1 is a delta whose chunks ckpt-2's save took from the tier: its
	// 4 tensor chunks come from the read cache (rebuilt now, or by that
	// save) and none from the tier.
	hitsBefore, missesBefore, _ := ds.cache.Stats()
	if got := readFile(t, ds.Store, "ckpt-1.npy"); !bytes.Equal(got, ckpttest.NpyFile(series[1])) {
		t.Fatal("ckpt-1 read back differs")
	}
	if hits, misses, _ := ds.cache.Stats(); hits+misses-hitsBefore-missesBefore < 4 {
		t.Errorf("ckpt-1 was read with only %d chunks from the cache; its chunks left the tier", hits+misses-hitsBefore-missesBefore)
	}
	mustCheck(t, ds.Store, true)
}

// TestReadsOnlyStoreCachesForReads: a store opened only to be read (a
// replica) keeps no reference tier: its readers get the whole cache, so a
// checkpoint that fits in it is rebuilt once however often it is read.
func TestReadsOnlyStoreCachesForReads(t *testing.T) {
	dir := t.TempDir()
	ds := openTestStore(t, dir, policy.Default())
	want := ckpttest.NpyFile(ckpttest.TrainingSeries(23, 750_000, 1)[0]) // 3 MB: 12 chunks
	writeFile(t, ds.Store, "ckpt.npy", want, 1<<20)
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20, ReadsOnly: true},
		Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := 0; i < 2; i++ {
		_, missesBefore, _ := ds.cache.Stats()
		if got := readFile(t, ds.Store, "ckpt.npy"); !bytes.Equal(got, want) {
			t.Fatal("read back differs")
		}
		_, misses, _ := ds.cache.Stats()
		if i == 1 && misses != missesBefore {
			t.Errorf("second read rebuilt %d chunks: the reads' cache did not get the tier's share", misses-missesBefore)
		}
	}
}

// TestReferenceRebuiltForSaveNotCached: a save whose reference chunks are
// not in the tier rebuilds them from the device for its encoders alone:
// it is still coded against them, reads back exactly, and leaves nothing
// in the read cache (where those chunks would have evicted readers' ones).
func TestReferenceRebuiltForSaveNotCached(t *testing.T) {
	// No tier (ReadsOnly), and a read cache that would hold the chunks.
	ds, err := OpenDir(t.TempDir(), DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20, ReadsOnly: true},
		Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	series := ckpttest.TrainingSeries(24, 500_000, 2)
	writeFile(t, ds.Store, "ckpt-1.npy", ckpttest.NpyFile(series[0]), 1<<20)
	ds.DropCaches()
	_, missesBefore, _ := ds.cache.Stats()
	ino := writeFile(t, ds.Store, "ckpt-2.npy", ckpttest.NpyFile(series[1]), 1<<20)
	_, misses, size := ds.cache.Stats()
	if misses-missesBefore < 7 { // 2 MB of float32: 7 or 8 chunks of 256 KiB
		t.Errorf("the save looked up %d reference chunks in the read cache, want every one", misses-missesBefore)
	}
	if size != 0 {
		t.Errorf("the save left %d bytes in the read cache", size)
	}
	info, err := ds.Info(ino)
	if err != nil {
		t.Fatal(err)
	}
	if info.Reference == 0 {
		t.Error("ckpt-2.npy is a baseline: its rebuilt references were not used")
	}
	if got := readFile(t, ds.Store, "ckpt-2.npy"); !bytes.Equal(got, ckpttest.NpyFile(series[1])) {
		t.Fatal("ckpt-2.npy read back differs")
	}
	mustCheck(t, ds.Store, true)
}

// waitReadAheadDone waits until no reader's read-ahead runs.
func waitReadAheadDone(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); readingAhead.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d readers still reading ahead", readingAhead.Load())
		}
	}
}

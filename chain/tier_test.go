package chain

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ckptfs/ckptfs/chain/internal/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
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

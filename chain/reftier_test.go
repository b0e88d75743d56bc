package chain

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

func TestRefTierSemantics(t *testing.T) {
	rt := newRefTier(100)
	k := func(v, off int) chunkKey { return chunkKey{meta.VersionID(v), int64(off)} }
	rt.startSave("f", 0)
	rt.offer(k(1, 0), "f", make([]byte, 60))
	rt.offer(k(1, 60), "f", make([]byte, 60)) // no room, nothing stale: refused
	if _, ok := rt.get(k(1, 60), false); ok {
		t.Fatal("offer past the limit was kept")
	}
	if _, ok := rt.get(k(1, 0), false); !ok {
		t.Fatal("get without take lost the chunk")
	}
	if _, ok := rt.get(k(1, 0), true); !ok || rt.size != 0 {
		t.Fatalf("take: ok=%v size=%d", ok, rt.size)
	}
	if _, ok := rt.get(k(1, 0), true); ok {
		t.Fatal("taken chunk still there")
	}
	// A new save of the family drops its versions other than the reference.
	rt.offer(k(2, 0), "f", make([]byte, 10))
	rt.offer(k(3, 0), "f", make([]byte, 10))
	rt.startSave("f", 3)
	if _, ok := rt.get(k(2, 0), false); ok {
		t.Fatal("a version that is no longer the reference was kept")
	}
	if _, ok := rt.get(k(3, 0), false); !ok {
		t.Fatal("the reference was dropped")
	}
	// Families idle for staleAfter saves give way when room is short.
	for i := 0; i < staleAfter; i++ {
		rt.startSave(fmt.Sprint("other", i), 0)
	}
	rt.offer(k(9, 0), "g", make([]byte, 95))
	if _, ok := rt.get(k(9, 0), false); !ok {
		t.Fatal("a stale family's version was not evicted to make room")
	}
	if _, ok := rt.get(k(3, 0), false); ok {
		t.Fatal("stale version survived the eviction")
	}
}

// TestSecondSaveNeedsNoRebuild: a checkpoint that fits in the reference
// tier is coded against the previous one without rebuilding it through
// the delta chain.
func TestSecondSaveNeedsNoRebuild(t *testing.T) {
	ds := openTestStore(t, "", DefaultPolicy())
	defer ds.Close()
	series := trainingSeries(21, 200_000, 3)
	for i, w := range series {
		_, missesBefore, _ := ds.cache.stats()
		hitsBefore := ds.refs.hits
		writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), npyFile(w), 1<<20)
		_, misses, _ := ds.cache.stats()
		if i == 0 {
			continue
		}
		if misses != missesBefore {
			t.Errorf("save %d rebuilt %d reference chunks", i, misses-missesBefore)
		}
		if ds.refs.hits-hitsBefore < 3 { // 800 kB of float32: 4 chunks of 256 KiB
			t.Errorf("save %d took only %d references from the tier", i, ds.refs.hits-hitsBefore)
		}
	}
	mustCheck(t, ds.Store, true)
}

// TestReadBackFromTier: the checkpoint just saved is read from the
// reference tier, byte for byte, without rebuilding a chunk through the
// delta chain; once the next save has taken its chunks, reads rebuild.
func TestReadBackFromTier(t *testing.T) {
	ds := openTestStore(t, "", DefaultPolicy())
	defer ds.Close()
	series := trainingSeries(22, 200_000, 3)
	for i, w := range series {
		name := fmt.Sprintf("ckpt-%d.npy", i)
		want := npyFile(w)
		writeFile(t, ds.Store, name, want, 1<<20)
		_, missesBefore, _ := ds.cache.stats()
		if got := readFile(t, ds.Store, name); !bytes.Equal(got, want) {
			t.Fatalf("%s read back differs", name)
		}
		// The npy header is a raw chunk, never in the tier: at most one
		// rebuild per read.
		if _, misses, _ := ds.cache.stats(); misses-missesBefore > 1 {
			t.Errorf("reading back %s rebuilt %d chunks", name, misses-missesBefore)
		}
	}
	// ckpt-1 is a delta whose chunks ckpt-2's save took from the tier.
	_, missesBefore, _ := ds.cache.stats()
	if got := readFile(t, ds.Store, "ckpt-1.npy"); !bytes.Equal(got, npyFile(series[1])) {
		t.Fatal("ckpt-1 read back differs")
	}
	if _, misses, _ := ds.cache.stats(); misses-missesBefore < 4 {
		t.Errorf("ckpt-1 was rebuilt with only %d chunk decodes; its chunks left the tier", misses-missesBefore)
	}
	mustCheck(t, ds.Store, true)
}

func TestRefTierCopyAt(t *testing.T) {
	rt := newRefTier(100)
	k := chunkKey{1, 0}
	rt.offer(k, "f", []byte("abcdef"))
	dst := make([]byte, 4)
	if n, ok := rt.copyAt(k, dst, 3); !ok || n != 3 || string(dst[:n]) != "def" {
		t.Fatalf("copyAt(3) = %d %v %q", n, ok, dst[:n])
	}
	// At or past the end there is nothing to copy: not served, so a reader
	// rebuilds instead of looping on zero bytes.
	if n, ok := rt.copyAt(k, dst, 6); ok {
		t.Fatalf("copyAt at the end = %d, true", n)
	}
	if _, ok := rt.copyAt(chunkKey{2, 0}, dst, 0); ok {
		t.Fatal("copyAt of an absent chunk succeeded")
	}
}

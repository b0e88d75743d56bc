package plaincache

import (
	"fmt"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

func TestRefTierSemantics(t *testing.T) {
	const u = minTierChunk
	rt := NewTier(100 * u)
	k := func(v, off int) Key { return Key{V: meta.VersionID(v), Off: int64(off)} }
	rt.StartSave("f", 0)
	rt.Offer(k(1, 0), "f", make([]byte, 60*u))
	rt.Offer(k(1, 60*u), "f", make([]byte, 60*u)) // no room, nothing stale: refused
	if _, ok := rt.Get(k(1, 60*u), false); ok {
		t.Fatal("offer past the limit was kept")
	}
	if _, ok := rt.Get(k(1, 0), false); !ok {
		t.Fatal("get without take lost the chunk")
	}
	if _, ok := rt.Get(k(1, 0), true); !ok || rt.size != 0 {
		t.Fatalf("take: ok=%v size=%d", ok, rt.size)
	}
	if _, ok := rt.Get(k(1, 0), true); ok {
		t.Fatal("taken chunk still there")
	}
	// A new save of the family drops its versions other than the reference.
	rt.Offer(k(2, 0), "f", make([]byte, 10*u))
	rt.Offer(k(3, 0), "f", make([]byte, 10*u))
	rt.StartSave("f", 3)
	if _, ok := rt.Get(k(2, 0), false); ok {
		t.Fatal("a version that is no longer the reference was kept")
	}
	if _, ok := rt.Get(k(3, 0), false); !ok {
		t.Fatal("the reference was dropped")
	}
	// Families idle for staleAfter saves give way when room is short.
	for i := 0; i < staleAfter; i++ {
		rt.StartSave(fmt.Sprint("other", i), 0)
	}
	rt.Offer(k(9, 0), "g", make([]byte, 95*u))
	if _, ok := rt.Get(k(9, 0), false); !ok {
		t.Fatal("a stale family's version was not evicted to make room")
	}
	if _, ok := rt.Get(k(3, 0), false); ok {
		t.Fatal("stale version survived the eviction")
	}
}

func TestRefTierCopyAt(t *testing.T) {
	rt := NewTier(100 * minTierChunk)
	k := Key{V: 1}
	v := make([]byte, minTierChunk)
	copy(v[minTierChunk-6:], "abcdef")
	rt.Offer(k, "f", v)
	dst := make([]byte, 4)
	if n, ok := rt.CopyAt(k, dst, minTierChunk-3); !ok || n != 3 || string(dst[:n]) != "def" {
		t.Fatalf("CopyAt(len-3) = %d %v %q", n, ok, dst[:n])
	}
	// At or past the end there is nothing to copy: not served, so a reader
	// rebuilds instead of looping on zero bytes.
	if n, ok := rt.CopyAt(k, dst, minTierChunk); ok {
		t.Fatalf("copyAt at the end = %d, true", n)
	}
	if _, ok := rt.CopyAt(Key{V: 2}, dst, 0); ok {
		t.Fatal("copyAt of an absent chunk succeeded")
	}
}

func TestTierBytes(t *testing.T) {
	for _, c := range []struct{ total, tier int64 }{
		{0, 0},
		{8 << 20, 7 << 20},       // small budgets (tests) keep the 7/8 split
		{32 << 20, 28 << 20},     //
		{64 << 20, 48 << 20},     // the mount's default: reads keep 16 MiB
		{128 << 20, 112 << 20},   // 7/8 leaves reads 16 MiB already
		{1536 << 20, 1344 << 20}, //
	} {
		if got := TierBytes(c.total); got != c.tier {
			t.Errorf("TierBytes(%d MiB) = %d MiB, want %d MiB", c.total>>20, got>>20, c.tier>>20)
		}
		if c.total >= 64<<20 && c.total-TierBytes(c.total) < 16<<20 {
			t.Errorf("TierBytes(%d MiB) leaves reads %d MiB", c.total>>20, (c.total-TierBytes(c.total))>>20)
		}
	}
}

// TestTierCountsMemory: the tier is bounded by the memory its buffers hold
// (their capacity, not the bytes of the chunk in them), and keeps no chunk
// under minTierChunk. Thousands of small files, each its own family, were
// each kept in a chunk buffer of 64 KiB counted as their few bytes: 3000
// files of 64 bytes held 196 MB, past the daemon's heap limit, and every
// save's StartSave walked them all.
func TestTierCountsMemory(t *testing.T) {
	rt := NewTier(1 << 20)
	if rt.Offer(Key{V: 1}, "tiny", make([]byte, 48, 64<<10)) {
		t.Error("a 48-byte chunk was kept")
	}
	kept := 0
	for i := range 64 {
		if rt.Offer(Key{V: meta.VersionID(10 + i)}, fmt.Sprint("f", i), make([]byte, minTierChunk, 64<<10)) {
			kept++
		}
	}
	if kept != 16 || rt.size != 16*(64<<10) {
		t.Errorf("kept %d chunks of %d bytes in 64 KiB buffers, %d bytes counted; want 16 (1 MiB)", kept, minTierChunk, rt.size)
	}
}

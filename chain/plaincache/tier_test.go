package plaincache

import (
	"fmt"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

func TestRefTierSemantics(t *testing.T) {
	rt := NewTier(100)
	k := func(v, off int) Key { return Key{meta.VersionID(v), int64(off)} }
	rt.StartSave("f", 0)
	rt.Offer(k(1, 0), "f", make([]byte, 60))
	rt.Offer(k(1, 60), "f", make([]byte, 60)) // no room, nothing stale: refused
	if _, ok := rt.Get(k(1, 60), false); ok {
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
	rt.Offer(k(2, 0), "f", make([]byte, 10))
	rt.Offer(k(3, 0), "f", make([]byte, 10))
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
	rt.Offer(k(9, 0), "g", make([]byte, 95))
	if _, ok := rt.Get(k(9, 0), false); !ok {
		t.Fatal("a stale family's version was not evicted to make room")
	}
	if _, ok := rt.Get(k(3, 0), false); ok {
		t.Fatal("stale version survived the eviction")
	}
}

func TestRefTierCopyAt(t *testing.T) {
	rt := NewTier(100)
	k := Key{1, 0}
	rt.Offer(k, "f", []byte("abcdef"))
	dst := make([]byte, 4)
	if n, ok := rt.CopyAt(k, dst, 3); !ok || n != 3 || string(dst[:n]) != "def" {
		t.Fatalf("CopyAt(3) = %d %v %q", n, ok, dst[:n])
	}
	// At or past the end there is nothing to copy: not served, so a reader
	// rebuilds instead of looping on zero bytes.
	if n, ok := rt.CopyAt(k, dst, 6); ok {
		t.Fatalf("copyAt at the end = %d, true", n)
	}
	if _, ok := rt.CopyAt(Key{2, 0}, dst, 0); ok {
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

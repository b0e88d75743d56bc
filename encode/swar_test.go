package encode

import (
	"math/rand/v2"
	"testing"
)

// The lane-wise SUB must agree with the scalar one in every lane, including
// the carry and borrow cases at lane boundaries.
func TestSWARMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	edge := []uint64{0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF}
	pick := func() uint64 {
		if rng.IntN(3) == 0 {
			v := uint64(0)
			for j := 0; j < 4; j++ {
				v |= edge[rng.IntN(len(edge))] & 0xFFFF << (16 * j)
			}
			return v
		}
		return rng.Uint64()
	}
	for i := 0; i < 200000; i++ {
		p, r := pick(), pick()
		z := lanes16.subLanes(p, r)
		for j := uint(0); j < 64; j += 16 {
			want := sub16(uint16(p>>j), uint16(r>>j), 0, 0xFFFF)
			if uint16(z>>j) != want {
				t.Fatalf("sub16 lanes %#x %#x lane %d: %#x want %#x", p, r, j/16, uint16(z>>j), want)
			}
		}
		if back := lanes16.unsubLanes(z, r); back != p {
			t.Fatalf("unsub16 lanes %#x %#x: %#x", p, r, back)
		}
		z = lanes32.subLanes(p, r)
		for j := uint(0); j < 64; j += 32 {
			want := sub32(uint32(p>>j), uint32(r>>j), 0, 0xFFFFFFFF)
			if uint32(z>>j) != want {
				t.Fatalf("sub32 lanes %#x %#x lane %d: %#x want %#x", p, r, j/32, uint32(z>>j), want)
			}
		}
		if back := lanes32.unsubLanes(z, r); back != p {
			t.Fatalf("unsub32 lanes %#x %#x: %#x", p, r, back)
		}
	}
}

package chain

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

func TestCRC32Zeros(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	zeros := make([]byte, 1<<20)
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 4096, 65537, 1 << 20} {
		for _, start := range []uint32{0, 0xffffffff, rng.Uint32()} {
			want := crc32.Update(start, castagnoli, zeros[:n])
			if got := crc32Zeros(start, int64(n)); got != want {
				t.Errorf("crc32Zeros(%08x, %d) = %08x, want %08x", start, n, got, want)
			}
		}
	}
	// Composes: data, a long run of zeros, data.
	data := make([]byte, 1000)
	rng.Read(data)
	want := crc32.Update(0, castagnoli, data)
	for i := 0; i < 5; i++ {
		want = crc32.Update(want, castagnoli, zeros)
	}
	want = crc32.Update(want, castagnoli, data)
	got := crc32.Update(crc32Zeros(crc32.Update(0, castagnoli, data), 5<<20), castagnoli, data)
	if got != want {
		t.Errorf("data ‖ 5 MiB of zeros ‖ data: %08x, want %08x", got, want)
	}
}

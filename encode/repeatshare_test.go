package encode

import (
	"encoding/binary"
	"math/rand"
	"testing"
)

// repeatShareNaive is the definition: one word per step.
func repeatShareNaive(blk []byte) float64 {
	words := len(blk) / 8
	if words < 2 {
		return 0
	}
	same := 0
	for i := 8; i+8 <= len(blk); i += 8 {
		if binary.LittleEndian.Uint64(blk[i:]) == binary.LittleEndian.Uint64(blk[i-8:]) {
			same++
		}
	}
	return float64(same) / float64(words-1)
}

// The unrolled scan counts the same repeats as the definition, at every
// length (ragged tails, fewer than four words) and density of repeats.
func TestRepeatShareMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for trial := 0; trial < 5000; trial++ {
		blk := make([]byte, r.Intn(600))
		// Words of few distinct values, so that repeats are common.
		for i := 0; i+8 <= len(blk); i += 8 {
			binary.LittleEndian.PutUint64(blk[i:], uint64(r.Intn(1+trial%4)))
		}
		for i := len(blk) &^ 7; i < len(blk); i++ {
			blk[i] = byte(r.Intn(256))
		}
		if got, want := repeatShare(blk), repeatShareNaive(blk); got != want {
			t.Fatalf("%d bytes: repeatShare %v, want %v", len(blk), got, want)
		}
	}
	if got := repeatShare(make([]byte, 1<<16)); got != 1 {
		t.Fatalf("zero block: %v, want 1", got)
	}
}

// go test -run '^$' -bench RepeatShare ./encode/
func BenchmarkRepeatShare(b *testing.B) {
	blk := make([]byte, planeBlock)
	rand.New(rand.NewSource(1)).Read(blk)
	b.SetBytes(planeBlock)
	for b.Loop() {
		repeatShare(blk)
	}
}

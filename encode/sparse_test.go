package encode

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// sparseBlock is n bytes equal to m but for a share p of them, placed at
// random, plus runs of m long enough to need escapes.
func sparseBlock(rng *rand.Rand, n int, m byte, p float64) []byte {
	blk := bytes.Repeat([]byte{m}, n)
	for i := range blk {
		if rng.Float64() < p {
			blk[i] = byte(rng.Intn(256))
		}
	}
	if n > 2000 && rng.Intn(2) == 0 {
		start := rng.Intn(n - 1000)
		copy(blk[start:], bytes.Repeat([]byte{m}, 600+rng.Intn(400))) // a gap of 255s
	}
	return blk
}

// TestSparseRoundTrip: joinSparse rebuilds what splitSparse took apart, at
// every density and length (the tails of its eight-gap steps included),
// and refuses gaps and values that do not fit the block.
func TestSparseRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, n := range []int{1, 7, 8, 9, 63, 255, 256, 257, 1000, 4096, planeBlock} {
		for _, p := range []float64{0, 0.001, 0.05, 0.3, 0.7, 1} {
			for _, m := range []byte{0, 0x7f} {
				blk := sparseBlock(rng, n, m, p)
				gaps, vals := splitSparse(blk, m, nil, nil)
				got := make([]byte, n)
				if err := joinSparse(got, m, gaps, vals); err != nil {
					t.Fatalf("n=%d p=%g: %v", n, p, err)
				}
				if !bytes.Equal(got, blk) {
					t.Fatalf("n=%d p=%g m=%#x: joined block differs", n, p, m)
				}
				if len(vals) == 0 {
					continue
				}
				// Too many values, too few, and gaps running past the end.
				bad := []struct {
					gaps, vals []byte
				}{
					{gaps, vals[:len(vals)-1]},
					{append(bytes.Clone(gaps), 0), append(bytes.Clone(vals), 1)},
					{append(bytes.Clone(gaps), 254), append(bytes.Clone(vals), 1)},
					{append(bytes.Repeat([]byte{gapEscape}, n/gapEscape+1), gaps...), vals},
				}
				for i, c := range bad {
					if err := joinSparse(make([]byte, n), m, c.gaps, c.vals); !errors.Is(err, ErrCorrupt) {
						if i == 1 && len(vals) < n {
							continue // one more value still fits
						}
						if i == 2 && n-1-lastPos(blk, m) > 255 {
							continue
						}
						t.Fatalf("n=%d p=%g case %d: %v, want ErrCorrupt", n, p, i, err)
					}
				}
			}
		}
	}
}

// lastPos is the position of blk's last byte other than m, or -1.
func lastPos(blk []byte, m byte) int {
	for i := len(blk) - 1; i >= 0; i-- {
		if blk[i] != m {
			return i
		}
	}
	return -1
}

// BenchmarkJoinSparse: a 64 KiB plane block at the densities of a delta's
// high planes.
func BenchmarkJoinSparse(b *testing.B) {
	rng := rand.New(rand.NewSource(8))
	for _, p := range []float64{0.02, 0.1, 0.3} {
		blk := sparseBlock(rng, planeBlock, 0, p)
		gaps, vals := splitSparse(blk, 0, nil, nil)
		out := make([]byte, planeBlock)
		b.Run(fmt.Sprintf("density=%g", p), func(b *testing.B) {
			b.SetBytes(planeBlock)
			for b.Loop() {
				if err := joinSparse(out, 0, gaps, vals); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// joinSparseSimple is joinSparse one gap at a time: the reference the
// fuzzer holds it to.
func joinSparseSimple(blk []byte, m byte, gaps, vals []byte) error {
	fillByte(blk, m)
	pos, k := 0, 0
	for _, g := range gaps {
		if g == gapEscape {
			pos += gapEscape
			continue
		}
		pos += int(g)
		if pos >= len(blk) || k >= len(vals) {
			return ErrCorrupt
		}
		blk[pos] = vals[k]
		k++
		pos++
	}
	if k != len(vals) {
		return ErrCorrupt
	}
	return nil
}

// FuzzJoinSparse: any gaps and values join as the simple loop joins them,
// and fail where it fails.
func FuzzJoinSparse(f *testing.F) {
	rng := rand.New(rand.NewSource(9))
	for _, p := range []float64{0.01, 0.3, 0.9} {
		blk := sparseBlock(rng, 3000, 0, p)
		gaps, vals := splitSparse(blk, 0, nil, nil)
		f.Add(uint16(len(blk)), byte(0), gaps, vals)
	}
	f.Fuzz(func(t *testing.T, n uint16, m byte, gaps, vals []byte) {
		got, want := make([]byte, n), make([]byte, n)
		err, wantErr := joinSparse(got, m, gaps, vals), joinSparseSimple(want, m, gaps, vals)
		if (err == nil) != (wantErr == nil) || err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v, the simple loop's %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatal("joined bytes differ from the simple loop's")
		}
	})
}

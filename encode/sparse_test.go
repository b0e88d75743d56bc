package encode

import (
	"bytes"
	"encoding/binary"
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

// clusteredBlock is n bytes equal to m but for runs of 4-19 other bytes,
// a share p of the block in all: the gaps between them are mostly 0, as in
// the high planes of training deltas, where changed weights cluster.
func clusteredBlock(rng *rand.Rand, n int, m byte, p float64) []byte {
	blk := bytes.Repeat([]byte{m}, n)
	for i := 0; i < n; {
		if rng.Float64() < p/12 {
			for k := 4 + rng.Intn(16); k > 0 && i < n; k-- {
				blk[i] = m ^ byte(1+rng.Intn(3))
				i++
			}
			continue
		}
		i++
	}
	return blk
}

// TestNestedSparse: a sparse block whose gaps are mostly one value is coded
// with sparse gaps (chunk format 3), decodes to the block, and costs no
// more than the same block coded without nesting; a third level of
// nesting is refused as corrupt.
func TestNestedSparse(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, p := range []float64{0.02, 0.1, 0.3} {
		blk := clusteredBlock(rng, planeBlock, 0, p)
		var ps planeScratch
		enc := ps.appendBlock(nil, blk, 0)
		if enc[0] != blkSparse || ps.stats.Nested == 0 {
			t.Fatalf("p=%g: no nested sparse record (method %s, %d nested)", p, blkNames[enc[0]], ps.stats.Nested)
		}
		got := make([]byte, len(blk))
		var dec planeScratch
		rest, err := dec.decodeBlock(got, enc, 0, nil)
		if err != nil || len(rest) != 0 || !bytes.Equal(got, blk) {
			t.Fatalf("p=%g: nested sparse block does not decode: %v (%d bytes left)", p, err, len(rest))
		}
		// The same block with its parts never sparse (format 2's rule).
		var flat planeScratch
		sc := &flat.sparse[0]
		sc.gaps, sc.vals = splitSparse(blk, 0, nil, nil)
		two := append([]byte{blkSparse, 0}, uvarints(len(sc.gaps), len(sc.vals))...)
		two = flat.appendBlock(two, sc.gaps, maxSparseDepth+1)
		two = flat.appendBlock(two, sc.vals, maxSparseDepth+1)
		if len(enc) > len(two) {
			t.Errorf("p=%g: nested %d bytes, flat %d", p, len(enc), len(two))
		}
		t.Logf("p=%g: nested %d bytes, flat %d", p, len(enc), len(two))
	}
	// blkSparse(m=0, 1 gap, 1 value) whose gaps record is sparse, whose
	// gaps record is sparse again.
	inner := []byte{blkSparse, 0, 1, 1, blkStored, 0, blkStored, 1}
	mid := append([]byte{blkSparse, 0, 1, 1}, inner...)
	mid = append(mid, blkStored, 1)
	deep := append([]byte{blkSparse, 0, 1, 1}, mid...)
	deep = append(deep, blkStored, 1)
	var ps planeScratch
	if _, err := ps.decodeBlock(make([]byte, 4), deep, 0, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("sparse nested three deep: %v, want ErrCorrupt", err)
	}
	if _, err := ps.decodeBlock(make([]byte, 4), mid, 0, nil); err != nil {
		t.Errorf("sparse nested two deep: %v", err)
	}
}

func uvarints(v ...int) []byte {
	var b []byte
	for _, x := range v {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return b
}

// TestChunkVersions: chunks are written as format 3; format 2 chunks still
// decode (TestGoldenChunks), and a later version is refused as unsupported,
// not as corrupt.
func TestChunkVersions(t *testing.T) {
	enc, err := Encode(nil, Planes, Float32, make([]byte, 64), nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc[1] != 3 {
		t.Fatalf("chunk written as format %d, want 3", enc[1])
	}
	for v, want := range map[byte]error{2: nil, 3: nil, 1: ErrUnsupported, 4: ErrUnsupported} {
		c := bytes.Clone(enc)
		c[1] = v
		if _, err := Decode(nil, c, nil); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("format %d: %v, want %v", v, err, want)
		}
	}
}

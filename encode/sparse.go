package encode

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The sparse block: for a plane where one byte value m dominates (the high
// planes of a delta are mostly zero), only the positions that differ from m
// are coded, as gaps, with the differing values. Huffman cannot spend less
// than one bit on the dominant value; coding the gaps lets it, and
// expanding them (fill with m, then one store per value) is several times
// faster than decoding FSE, which could too.
//
//	blkSparse, m, uvarint gap count, uvarint value count,
//	gaps record, values record
//
// Each gap byte g < 255 skips g bytes equal to m and then places the next
// value; g = 255 skips 255 bytes and places nothing. Bytes after the last
// value are m.

const gapEscape = 255

// diffMask returns a byte with bit j set when byte j of x is not zero: the
// high bit of each byte flags it, and the multiply gathers bit 8j to 56+j.
func diffMask(x uint64) byte {
	t := ((x & 0x7F7F7F7F7F7F7F7F) + 0x7F7F7F7F7F7F7F7F | x) >> 7 & 0x0101010101010101
	return byte(t * 0x0102040810204080 >> 56)
}

// splitSparse returns the gaps and values of blk against m, in gaps and
// vals reused (their capacity grown to the worst case up front, so the loop
// stores by index).
func splitSparse(blk []byte, m byte, gaps, vals []byte) ([]byte, []byte) {
	n := len(blk)
	gaps = grow(gaps, n+n/gapEscape+1)
	vals = grow(vals, n)
	rep := uint64(m) * 0x0101010101010101
	ng, nv, next := 0, 0, 0 // next: first position not yet covered
	n8 := n &^ 7
	for i := 0; i < n; i += 8 {
		var b byte
		if i < n8 {
			b = diffMask(binary.LittleEndian.Uint64(blk[i:]) ^ rep)
		} else {
			for j, v := range blk[i:] {
				if v != m {
					b |= 1 << j
				}
			}
		}
		for ; b != 0; b &= b - 1 {
			pos := i + bits.TrailingZeros8(b)
			g := pos - next
			for g >= gapEscape {
				gaps[ng] = gapEscape
				ng++
				g -= gapEscape
			}
			gaps[ng] = byte(g)
			vals[nv] = blk[pos]
			ng, nv, next = ng+1, nv+1, pos+1
		}
	}
	return gaps[:ng], vals[:nv]
}

// joinSparse expands gaps and vals into blk.
func joinSparse(blk []byte, m byte, gaps, vals []byte) error {
	fillByte(blk, m)
	pos, k := 0, 0
	for _, g := range gaps {
		if g == gapEscape {
			pos += gapEscape
			continue
		}
		pos += int(g)
		if pos >= len(blk) || k >= len(vals) {
			return fmt.Errorf("%w: sparse gaps run past the block", ErrCorrupt)
		}
		blk[pos] = vals[k]
		k++
		pos++
	}
	if k != len(vals) {
		return fmt.Errorf("%w: %d sparse values left over", ErrCorrupt, len(vals)-k)
	}
	return nil
}

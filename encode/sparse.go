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

// splitSparse appends the gaps and values of blk against m.
func splitSparse(blk []byte, m byte, gaps, vals []byte) ([]byte, []byte) {
	rep := uint64(m) * 0x0101010101010101
	next := 0 // first position not yet covered by a gap
	place := func(pos int) {
		g := pos - next
		for g >= gapEscape {
			gaps = append(gaps, gapEscape)
			g -= gapEscape
		}
		gaps = append(gaps, byte(g))
		vals = append(vals, blk[pos])
		next = pos + 1
	}
	n8 := len(blk) &^ 7
	for i := 0; i < n8; i += 8 {
		for b := diffMask(binary.LittleEndian.Uint64(blk[i:]) ^ rep); b != 0; b &= b - 1 {
			place(i + bits.TrailingZeros8(b))
		}
	}
	for i := n8; i < len(blk); i++ {
		if blk[i] != m {
			place(i)
		}
	}
	return gaps, vals
}

// joinSparse expands gaps and vals into blk.
func joinSparse(blk []byte, m byte, gaps, vals []byte) error {
	rep := uint64(m) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(blk); i += 8 {
		binary.LittleEndian.PutUint64(blk[i:], rep)
	}
	for ; i < len(blk); i++ {
		blk[i] = m
	}
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

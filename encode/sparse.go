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
// The gaps and values records are blocks of their own, sparse themselves
// where one value dominates them (chunk format 3, maxSparseDepth). Each gap byte g < 255 skips g bytes equal to m and then places the next
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

// joinSparse expands gaps and vals into blk. Eight gaps at a time, where
// none of them escapes and their eight values land inside blk, it checks
// once per eight stores instead of once per store (1.4-1.6x where 10-30%
// of the bytes are placed: BenchmarkJoinSparse).
func joinSparse(blk []byte, m byte, gaps, vals []byte) error {
	fillByte(blk, m)
	pos, k := 0, 0
	for i := 0; i < len(gaps); {
		if i+8 <= len(gaps) && k+8 <= len(vals) {
			w := binary.LittleEndian.Uint64(gaps[i:])
			if end := pos + gapSum8(w) + 8; !hasEscape8(w) && end <= len(blk) {
				v := vals[k : k+8 : k+8]
				b := blk[pos:end:end]
				p := int(w & 0xff)
				b[p] = v[0]
				p += 1 + int(w>>8&0xff)
				b[p] = v[1]
				p += 1 + int(w>>16&0xff)
				b[p] = v[2]
				p += 1 + int(w>>24&0xff)
				b[p] = v[3]
				p += 1 + int(w>>32&0xff)
				b[p] = v[4]
				p += 1 + int(w>>40&0xff)
				b[p] = v[5]
				p += 1 + int(w>>48&0xff)
				b[p] = v[6]
				p += 1 + int(w>>56)
				b[p] = v[7]
				pos, k, i = end, k+8, i+8
				continue
			}
		}
		g := gaps[i]
		i++
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

// gapSum8 is the sum of the eight bytes of w.
func gapSum8(w uint64) int {
	t := w&0x00ff00ff00ff00ff + w>>8&0x00ff00ff00ff00ff
	t += t >> 16
	t += t >> 32
	return int(t & 0xffff)
}

// hasEscape8 reports whether a byte of w is gapEscape (0xff).
func hasEscape8(w uint64) bool {
	x := ^w // escapes become zero bytes
	return (x-0x0101010101010101)&^x&0x8080808080808080 != 0
}

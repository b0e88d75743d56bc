package encode

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The sparse block: for a plane where one byte value m dominates (the high
// planes of a delta are mostly zero), a bitmap of the positions that differ
// from m plus the differing bytes, each coded as an ordinary block record.
// Huffman cannot spend less than one bit on the dominant value; the bitmap's
// bytes (eight positions each) let it, and expanding the bitmap is cheaper
// than decoding FSE, which could.
//
//	blkSparse, m, bitmap record (ceil(n/8) bytes, bit i%8 of byte i/8 set
//	when byte i != m, unused high bits of the last byte zero),
//	values record (popcount(bitmap) bytes)

const lsbGather = 0x0102040810204080 // moves bit 8j to bit 56+j, see diffMask

// diffMask returns a byte with bit j set when byte j of x is not zero.
func diffMask(x uint64) byte {
	t := ((x & 0x7F7F7F7F7F7F7F7F) + 0x7F7F7F7F7F7F7F7F | x) >> 7 & 0x0101010101010101
	return byte(t * lsbGather >> 56)
}

// splitSparse fills bitmap (ceil(n/8) bytes) and returns the values.
func splitSparse(blk []byte, m byte, bitmap, vals []byte) []byte {
	rep := uint64(m) * 0x0101010101010101
	n8 := len(blk) &^ 7
	bitmap = bitmap[:(len(blk)+7)/8]
	for i := 0; i < n8; i += 8 {
		b := diffMask(binary.LittleEndian.Uint64(blk[i:]) ^ rep)
		bitmap[i/8] = b
		for b != 0 {
			vals = append(vals, blk[i+bits.TrailingZeros8(b)])
			b &= b - 1
		}
	}
	if n8 < len(blk) {
		var b byte
		for j, v := range blk[n8:] {
			if v != m {
				b |= 1 << j
				vals = append(vals, v)
			}
		}
		bitmap[n8/8] = b
	}
	return vals
}

// popcount of the bitmap: the number of values a sparse block holds.
func popcount(bitmap []byte) int {
	c := 0
	i := 0
	for ; i+8 <= len(bitmap); i += 8 {
		c += bits.OnesCount64(binary.LittleEndian.Uint64(bitmap[i:]))
	}
	for ; i < len(bitmap); i++ {
		c += bits.OnesCount8(bitmap[i])
	}
	return c
}

// joinSparse expands bitmap and vals (exactly popcount(bitmap) bytes) into blk.
func joinSparse(blk []byte, m byte, bitmap, vals []byte) error {
	n := len(blk)
	if len(bitmap) != (n+7)/8 {
		return fmt.Errorf("%w: sparse bitmap of %d bytes for %d", ErrCorrupt, len(bitmap), n)
	}
	if n%8 != 0 && bitmap[len(bitmap)-1]>>(n%8) != 0 {
		return fmt.Errorf("%w: sparse bitmap marks bytes past the block", ErrCorrupt)
	}
	rep := uint64(m) * 0x0101010101010101
	n8 := n &^ 7
	k := 0
	for i := 0; i < n8; i += 8 {
		b := bitmap[i/8]
		binary.LittleEndian.PutUint64(blk[i:], rep)
		if b == 0 {
			continue
		}
		g := blk[i : i+8 : i+8]
		for b != 0 {
			if k >= len(vals) {
				return fmt.Errorf("%w: sparse values run short", ErrCorrupt)
			}
			g[bits.TrailingZeros8(b)] = vals[k]
			k++
			b &= b - 1
		}
	}
	if n8 < n {
		b := bitmap[n8/8]
		for j := range blk[n8:] {
			blk[n8+j] = m
			if b>>j&1 != 0 {
				if k >= len(vals) {
					return fmt.Errorf("%w: sparse values run short", ErrCorrupt)
				}
				blk[n8+j] = vals[k]
				k++
			}
		}
	}
	if k != len(vals) {
		return fmt.Errorf("%w: %d sparse values left over", ErrCorrupt, len(vals)-k)
	}
	return nil
}

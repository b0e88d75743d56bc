package encode

import "fmt"

// Grouping: the planes of a delta chunk coded in up to maxGroups groups of
// elements, one set of entropy tables per group, and optionally without the
// elements that equal their reference.
//
// Order-0 coding of a byte plane pays for mixing elements of different
// statistics. For float deltas the reference element's exponent tells a lot
// about the delta: the same change in value is many ulps for a small weight
// and few for a large one, and an Adam moment that was tiny stays tiny.
// The decoder knows every reference element before it decodes anything, so
// the encoder can route elements into groups by the reference's exponent
// byte at no cost in side information beyond the group thresholds. Elements
// equal to their reference (frozen or dead units) are many in some tensors;
// a bitmap of the changed ones lets the planes skip them.
//
// Record (after mode and shift, when the mode byte has modeGrouped):
//
//	k        1 byte, 1..maxGroups
//	thr      k-1 bytes, strictly increasing: an element whose reference has
//	         context byte c is in group #{i : thr[i] <= c}
//
// and, when the mode byte has modeMasked, the mask: ceil(n/8) bytes, bit
// i%8 of byte i/8 set when element i differs from its reference, coded as
// plane blocks (planeblock.go). The planes then hold only the changed
// elements, group 0's first, each group in element order; every plane is
// coded group by group, each group's bytes as their own blocks. The context
// byte is the 8 bits below the sign: the exponent of fp32, bf16 and fp64's
// top exponent bits, fp16's exponent and top mantissa bits.
const maxGroups = 8

// Mode byte flags (the low two bits are the transform or modeSame).
const (
	modeGrouped = 0x04
	modeMasked  = 0x08
	modeFlags   = modeGrouped | modeMasked
)

type grouping struct {
	k      int
	thr    [maxGroups - 1]byte
	masked bool
}

// ctxShift is where the context byte starts in a w-byte element.
func ctxShift(w int) uint { return uint(8*w - 9) }

// table maps every context byte to its group.
func (g *grouping) table() (t [256]byte) {
	for c := range t {
		for _, th := range g.thr[:g.k-1] {
			if byte(c) >= th {
				t[c]++
			}
		}
	}
	return t
}

func (g *grouping) appendHeader(dst []byte) []byte {
	dst = append(dst, byte(g.k))
	return append(dst, g.thr[:g.k-1]...)
}

// parseGrouping reads the group record; the caller says whether the mode
// byte announced a mask.
func parseGrouping(src []byte, masked bool) (grouping, []byte, error) {
	g := grouping{k: 1, masked: masked}
	if len(src) < 1 {
		return g, nil, fmt.Errorf("%w: group record truncated", ErrCorrupt)
	}
	g.k = int(src[0])
	if g.k < 1 || g.k > maxGroups || len(src) < g.k {
		return g, nil, fmt.Errorf("%w: %d groups", ErrCorrupt, g.k)
	}
	copy(g.thr[:], src[1:g.k])
	for i := 1; i < g.k-1; i++ {
		if g.thr[i] <= g.thr[i-1] {
			return g, nil, fmt.Errorf("%w: group thresholds not increasing", ErrCorrupt)
		}
	}
	return g, src[g.k:], nil
}

// routeScratch is the grouping's part of a Coder.
type routeScratch struct {
	mask  []byte   // changed-element bitmap
	pos   []uint32 // portable route: each element's place in the grouped order
	words []byte   // grouped transformed words (AVX2 route)
	tmp   []byte   // planes in element order (portable route)
}

// buildMask sets bit i of mask when element i of plain and ref differ and
// returns how many do.
func buildMask(mask, plain, ref []byte, n, w int) int {
	for i := range mask {
		mask[i] = 0
	}
	changed := 0
	for i := 0; i < n; i++ {
		if loadWord(plain[i*w:], w) != loadWord(ref[i*w:], w) {
			mask[i>>3] |= 1 << (i & 7)
			changed++
		}
	}
	return changed
}

// groupCounts counts the changed elements of each group.
func groupCounts(ref, mask []byte, n, w int, gt *[256]byte) (cnt [maxGroups]int) {
	sh := ctxShift(w)
	for i := 0; i < n; i++ {
		if mask != nil && mask[i>>3]>>(i&7)&1 == 0 {
			continue
		}
		cnt[gt[byte(loadWord(ref[i*w:], w)>>sh)]]++
	}
	return cnt
}

// positions fills pos[i] with element i's index in the grouped order, or
// ^0 for an element left out, given the groups' counts.
func positions(pos []uint32, ref, mask []byte, n, w int, gt *[256]byte, cnt *[maxGroups]int) {
	var cur [maxGroups]uint32
	acc := 0
	for g := range cur {
		cur[g] = uint32(acc)
		acc += cnt[g]
	}
	sh := ctxShift(w)
	for i := 0; i < n; i++ {
		if mask != nil && mask[i>>3]>>(i&7)&1 == 0 {
			pos[i] = ^uint32(0)
			continue
		}
		g := gt[byte(loadWord(ref[i*w:], w)>>sh)]
		pos[i] = cur[g]
		cur[g]++
	}
}

// scatterPlanes moves the w planes of n bytes in src (element order) into
// the w planes of m bytes in dst (grouped order).
func scatterPlanes(dst, src []byte, pos []uint32, n, m, w int) {
	for j := 0; j < w; j++ {
		d, s := dst[j*m:(j+1)*m], src[j*n:(j+1)*n]
		for i, p := range pos[:n] {
			if p != ^uint32(0) {
				d[p] = s[i]
			}
		}
	}
}

// gatherPlanes is scatterPlanes' inverse; left-out elements get zero bytes.
func gatherPlanes(dst, src []byte, pos []uint32, n, m, w int) {
	for j := 0; j < w; j++ {
		d, s := dst[j*n:(j+1)*n], src[j*m:(j+1)*m]
		for i, p := range pos[:n] {
			if p == ^uint32(0) {
				d[i] = 0
			} else {
				d[i] = s[p]
			}
		}
	}
}

// restoreUnchanged copies the reference into the elements the mask leaves
// out. XOR and SUB already give the reference for a zero plane value; a
// baseline transform does not.
func restoreUnchanged(out, ref, mask []byte, n, w int) {
	for b, m := range mask {
		if m == 0xFF {
			continue
		}
		for k := b * 8; k < min(b*8+8, n); k++ {
			if m>>(k&7)&1 == 0 {
				copy(out[k*w:(k+1)*w], ref[k*w:(k+1)*w])
			}
		}
	}
}

// appendMask codes the mask as plane blocks.
func (ps *planeScratch) appendMask(dst, mask []byte) []byte {
	for off := 0; off < len(mask); off += planeBlock {
		dst = ps.appendBlock(dst, mask[off:min(off+planeBlock, len(mask))], 0)
	}
	return dst
}

func (ps *planeScratch) decodeMask(mask, src []byte, zstdInto func(out, src []byte) error) ([]byte, error) {
	var err error
	for off := 0; off < len(mask); off += planeBlock {
		if src, err = ps.decodeBlock(mask[off:min(off+planeBlock, len(mask))], src, 0, zstdInto); err != nil {
			return nil, fmt.Errorf("mask block %d: %w", off/planeBlock, err)
		}
	}
	return src, nil
}

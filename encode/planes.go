package encode

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// The planes codec. Payload:
//
//	mode   1 byte: modeBase, modeXOR, modeSUB, or modeSame
//	shift  1 byte: t, the trailing zero bits dropped (not for modeSame)
//	planes w planes of n = len/w bytes, low byte first, each a sequence of
//	       block records (planeblock.go)
//	tail   the len%w plain bytes after the last element (not for modeSame)
//
// modeSame (the chunk equals its reference) has no other bytes. The
// transforms are in transform*.go, the block records in planeblock.go.

// planeScratch is the planes codec's part of a Coder: buffers and entropy
// coder state reused from chunk to chunk.
type planeScratch struct {
	buf     []byte
	sample  []byte
	huffEnc huff0.Scratch
	huffDec huff0.Scratch
	fse     fse.Scratch
	huffOut []byte
	fseOut  []byte
	stats   blockStats
	zenc    *zstd.Encoder // SpeedFastest, for plane blocks with runs
	zout    []byte
	bm      blockModel
	sparse  struct{ gaps, vals []byte }
	// onBlock, when set, sees every plane block before it is coded
	// (measurement only).
	onBlock func(plane int, blk []byte)
	// noZstd disables the zstd trial (measurement only).
	noZstd bool
	// force, when not nil, overrides the delta mode choice (measurement only).
	force *planeMode
	// forceChoice, when not nil, overrides the whole choice for delta
	// chunks (tests only).
	forceChoice *planeChoice
	// noGroups disables grouping, noExact the second coding of close
	// calls (measurement only).
	noGroups, noExact bool
	planner           groupPlanner
	// sampleCtx and sampleSame: per sampled element, its reference's
	// context byte and whether it is unchanged.
	sampleCtx  []byte
	sampleSame []bool
	// bestEst and alt: the chosen coding's estimate and the runner-up.
	bestEst float64
	alt     candidate
	altOut  []byte
	route   routeScratch
}

func (cd *Coder) encodePlanes(dst []byte, dt DType, plain, ref []byte) ([]byte, bool, error) {
	ps := &cd.pl
	w := dt.Width()
	n := len(plain) / w
	if ref != nil && bytes.Equal(plain, ref) {
		return append(dst, byte(modeSame)), true, nil
	}
	ch := planeChoice{mode: modeBase, grp: grouping{k: 1}}
	try := false
	if n > 0 {
		ch = ps.chooseMode(dt, plain, ref, n)
		try = ref != nil && ps.alt.est <= exactReach*ps.bestEst
	}
	if ps.force != nil && ref != nil {
		ch, try = planeChoice{mode: *ps.force, t: ch.t, grp: grouping{k: 1}}, false
	}
	if ps.forceChoice != nil && ref != nil {
		ch, try = *ps.forceChoice, false
	}
	if ps.noGroups {
		ch.grp = grouping{k: 1}
		try = false
	}
	if ps.noExact {
		try = false
	}
	start, stats := len(dst), ps.stats
	dst = ps.encodeChoice(dst, w, plain, ref, n, ch)
	if try {
		// The estimates are too close to call: code the runner-up too and
		// keep the smaller.
		alt := ps.alt.planeChoice
		won := ps.stats
		ps.stats = stats
		ps.altOut = ps.encodeChoice(ps.altOut[:0], w, plain, ref, n, alt)
		if a, b := len(ps.altOut), len(dst)-start; a < b || a == b && !alt.delta() {
			dst, ch = append(dst[:start], ps.altOut...), alt
		} else {
			ps.stats = won
		}
	}
	return dst, ch.delta(), nil
}

// exactReach: when the runner-up's estimate is within this factor of the
// best's, both are coded and the smaller kept (a baseline on a tie: it
// needs no reference). The estimates' baseMargin is for their noise; real
// sizes have none.
const exactReach = 1.01

// encodeChoice appends the payload coded as ch says.
func (ps *planeScratch) encodeChoice(dst []byte, w int, plain, ref []byte, n int, ch planeChoice) []byte {
	if ch.grouped() {
		return ps.encodeGrouped(dst, w, plain, ref, n, ch)
	}
	dst = append(dst, byte(ch.mode), byte(ch.t))
	ps.buf = grow(ps.buf, n*w)
	splitAny(ps.buf, plain, ref, n, w, ch.mode, ch.t)
	dst = ps.appendPlanes(dst, ps.buf, n, w, nil)
	return append(dst, plain[n*w:]...)
}

// appendPlanes codes w planes of m bytes, each cut at the group counts
// (nil: one group) and into blocks.
func (ps *planeScratch) appendPlanes(dst, pl []byte, m, w int, cnt []int) []byte {
	for j := 0; j < w; j++ {
		plane := pl[j*m : (j+1)*m]
		for _, seg := range segments(plane, cnt) {
			for off := 0; off < len(seg); off += planeBlock {
				blk := seg[off:min(off+planeBlock, len(seg))]
				if ps.onBlock != nil {
					ps.onBlock(j, blk)
				}
				dst = ps.appendBlock(dst, blk, 0)
			}
		}
	}
	return dst
}

// segments cuts a plane at the group counts.
func segments(plane []byte, cnt []int) [][]byte {
	if cnt == nil {
		return [][]byte{plane}
	}
	var segs [maxGroups][]byte
	off := 0
	for g, c := range cnt {
		segs[g] = plane[off : off+c]
		off += c
	}
	return segs[:len(cnt)]
}

// encodeGrouped writes a grouped and/or masked chunk (group.go).
func (ps *planeScratch) encodeGrouped(dst []byte, w int, plain, ref []byte, n int, ch planeChoice) []byte {
	g := &ch.grp
	flags := byte(0)
	if g.k > 1 {
		flags |= modeGrouped
	}
	if g.masked {
		flags |= modeMasked
	}
	dst = append(dst, byte(ch.mode)|flags, byte(ch.t))
	if g.k > 1 {
		dst = g.appendHeader(dst)
	}
	gt := g.table()
	var mask []byte
	var cnt [maxGroups]int
	var m int
	if routeKernels(w, ch.t, g.k) && n >= 8 {
		mask, cnt, m = ps.routeEncode(w, plain, ref, n, ch, &gt)
	} else {
		mask, cnt, m = ps.scatterEncode(w, plain, ref, n, ch, &gt)
	}
	if mask != nil {
		dst = ps.appendMask(dst, mask)
	}
	dst = ps.appendPlanes(dst, ps.buf, m, w, cnt[:g.k])
	return append(dst, plain[n*w:]...)
}

func (cd *Coder) decodePlanes(out []byte, dt DType, payload, ref []byte) error {
	ps := &cd.pl
	w := dt.Width()
	n := len(out) / w
	if len(payload) < 1 {
		return fmt.Errorf("%w: planes payload empty", ErrCorrupt)
	}
	mode := planeMode(payload[0] & 3)
	flags := payload[0] & modeFlags
	if mode == modeSame && payload[0] == byte(modeSame) {
		if ref == nil || len(payload) != 1 {
			return fmt.Errorf("%w: bad unchanged-chunk record", ErrCorrupt)
		}
		copy(out, ref)
		return nil
	}
	delta := mode != modeBase || flags != 0
	if payload[0]&^(3|modeFlags) != 0 || mode == modeSame || delta != (ref != nil) || len(payload) < 2 ||
		(flags != 0 && w == 1) {
		return fmt.Errorf("%w: planes mode %#x (delta chunk: %t)", ErrCorrupt, payload[0], ref != nil)
	}
	t := uint(payload[1])
	if t >= uint(8*w) || (w == 1 && t != 0) {
		return fmt.Errorf("%w: planes shift %d", ErrCorrupt, t)
	}
	src := payload[2:]
	if flags != 0 {
		return cd.decodeGrouped(out, w, n, src, ref, mode, t, flags)
	}
	ps.buf = grow(ps.buf, n*w)
	src, err := ps.decodePlanesInto(ps.buf, src, n, w, nil, cd.zstdInto)
	if err != nil {
		return err
	}
	if len(src) != len(out)-n*w {
		return fmt.Errorf("%w: %d bytes after the planes, want %d", ErrCorrupt, len(src), len(out)-n*w)
	}
	joinAny(out, ps.buf, ref, n, w, mode, t)
	copy(out[n*w:], src)
	return nil
}

// decodePlanesInto is appendPlanes' inverse.
func (ps *planeScratch) decodePlanesInto(pl, src []byte, m, w int, cnt []int, zstdInto func(out, src []byte) error) ([]byte, error) {
	var err error
	for j := 0; j < w; j++ {
		for g, seg := range segments(pl[j*m:(j+1)*m], cnt) {
			for off := 0; off < len(seg); off += planeBlock {
				src, err = ps.decodeBlock(seg[off:min(off+planeBlock, len(seg))], src, 0, zstdInto)
				if err != nil {
					return nil, fmt.Errorf("plane %d group %d block %d: %w", j, g, off/planeBlock, err)
				}
			}
		}
	}
	return src, nil
}

func (cd *Coder) decodeGrouped(out []byte, w, n int, src, ref []byte, mode planeMode, t uint, flags byte) error {
	ps := &cd.pl
	rs := &ps.route
	g := grouping{k: 1, masked: flags&modeMasked != 0}
	var err error
	if flags&modeGrouped != 0 {
		if g, src, err = parseGrouping(src, g.masked); err != nil {
			return err
		}
		if g.k < 2 {
			return fmt.Errorf("%w: grouped chunk with one group", ErrCorrupt)
		}
	}
	var mask []byte
	if g.masked {
		rs.mask = grow(rs.mask, (n+7)/8)
		mask = rs.mask
		if src, _, err = ps.decodeMask(mask, src, cd.zstdInto); err != nil {
			return err
		}
		if n&7 != 0 && mask[len(mask)-1]>>(n&7) != 0 {
			return fmt.Errorf("%w: mask bits past the last element", ErrCorrupt)
		}
	}
	gt := g.table()
	kernels := routeKernels(w, t, g.k) && n >= 8
	var cnt [maxGroups]int
	if kernels {
		if mask == nil {
			mask = rs.kernelMask(n, false)
		}
		thr := kernelThresholds(&g)
		c4 := countGroups(w, ref, nil, mask, n&^7, 2, &thr)
		tailCounts(&c4, w, nil, ref, mask, n&^7, n, 2, &gt)
		copy(cnt[:], c4[:])
	} else {
		cnt = groupCounts(ref, mask, n, w, &gt)
	}
	m := 0
	for _, c := range cnt {
		m += c
	}
	ps.buf = grow(ps.buf, m*w)
	if src, err = ps.decodePlanesInto(ps.buf, src, m, w, cnt[:g.k], cd.zstdInto); err != nil {
		return err
	}
	if len(src) != len(out)-n*w {
		return fmt.Errorf("%w: %d bytes after the planes, want %d", ErrCorrupt, len(src), len(out)-n*w)
	}
	if kernels {
		if err := ps.routeDecode(out, w, ref, mask, n, m, mode, &g, &cnt, &gt); err != nil {
			return err
		}
	} else {
		ps.gatherDecode(out, w, ref, mask, n, m, mode, t, &gt, &cnt)
	}
	copy(out[n*w:], src)
	return nil
}

// scatterEncode is routeEncode without the kernels.
func (ps *planeScratch) scatterEncode(w int, plain, ref []byte, n int, ch planeChoice, gt *[256]byte) ([]byte, [maxGroups]int, int) {
	rs := &ps.route
	var mask []byte
	if ch.grp.masked {
		rs.mask = grow(rs.mask, (n+7)/8)
		mask = rs.mask
		buildMask(mask, plain, ref, n, w)
	}
	cnt := groupCounts(ref, mask, n, w, gt)
	m := 0
	for _, c := range cnt {
		m += c
	}
	rs.tmp = grow(rs.tmp, n*w)
	splitAny(rs.tmp, plain, ref, n, w, ch.mode, ch.t)
	rs.pos = growPos(rs.pos, n)
	positions(rs.pos, ref, mask, n, w, gt, &cnt)
	ps.buf = grow(ps.buf, m*w)
	scatterPlanes(ps.buf, rs.tmp, rs.pos, n, m, w)
	return mask, cnt, m
}

// gatherDecode is routeDecode without the kernels.
func (ps *planeScratch) gatherDecode(out []byte, w int, ref, mask []byte, n, m int, mode planeMode, t uint, gt *[256]byte, cnt *[maxGroups]int) {
	rs := &ps.route
	rs.pos = growPos(rs.pos, n)
	positions(rs.pos, ref, mask, n, w, gt, cnt)
	rs.tmp = grow(rs.tmp, n*w)
	gatherPlanes(rs.tmp, ps.buf, rs.pos, n, m, w)
	joinAny(out, rs.tmp, ref, n, w, mode, t)
	if mask != nil && mode == modeBase {
		restoreUnchanged(out, ref, mask, n, w)
	}
}

func growPos(p []uint32, n int) []uint32 {
	if cap(p) < n {
		return make([]uint32, n)
	}
	return p[:n]
}

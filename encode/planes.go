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
//	mode   1 byte: the transform (modeBase, modeXOR, modeSUB) or modeSame,
//	       plus the flags modeGrouped and modeMasked
//	shift  1 byte: t, the trailing zero bits dropped (not for modeSame)
//	groups with modeGrouped: group count and thresholds (group.go)
//	mask   with modeMasked: the changed-element bitmap as block records
//	planes w planes of the m coded elements (n = len/w of them without a
//	       mask), low byte first, each group by group, each group's bytes a
//	       sequence of block records (planeblock.go)
//	tail   the len%w plain bytes after the last element (not for modeSame)
//
// modeSame (the chunk equals its reference) has no other bytes. The
// transforms are in transform*.go, grouping in group.go and route.go (this
// file's grouped paths in planes_grouped.go), the choice in choose.go and
// groupplan.go, the block records in planeblock.go.

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
	sparse  [maxSparseDepth + 1]struct{ gaps, vals []byte } // per nesting depth
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
		for g := 0; g < max(1, len(cnt)); g++ {
			seg := segment(plane, cnt, g)
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

// segment is group g's part of a plane cut at the group counts (all of it
// for nil counts).
func segment(plane []byte, cnt []int, g int) []byte {
	if cnt == nil {
		return plane
	}
	off := 0
	for _, c := range cnt[:g] {
		off += c
	}
	return plane[off : off+cnt[g]]
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
		for g := 0; g < max(1, len(cnt)); g++ {
			seg := segment(pl[j*m:(j+1)*m], cnt, g)
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

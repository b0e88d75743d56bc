package encode

import "fmt"

// The planes codec's grouped and masked chunks (group.go describes the
// record): the routing kernels where they apply (route.go), the portable
// scatter and gather otherwise.

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

// decodeGrouped is encodeGrouped's inverse; src follows the mode and shift.
func (cd *Coder) decodeGrouped(out []byte, w, n int, src, ref []byte, mode planeMode, t uint, flags byte) error {
	ps := &cd.pl
	g, mask, src, err := ps.readGroupRecords(w, n, src, flags, cd.zstdInto)
	if err != nil {
		return err
	}
	gt := g.table()
	kernels := routeKernels(w, t, g.k) && n >= 8
	if kernels && mask == nil {
		mask = ps.route.kernelMask(n, false)
	}
	cnt, m := groupSizes(w, n, ref, mask, &g, &gt, kernels)
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

// readGroupRecords reads the group and mask records the flags announce.
func (ps *planeScratch) readGroupRecords(w, n int, src []byte, flags byte, zstdInto func(out, src []byte) error) (grouping, []byte, []byte, error) {
	g := grouping{k: 1, masked: flags&modeMasked != 0}
	var err error
	if flags&modeGrouped != 0 {
		if g, src, err = parseGrouping(src, g.masked); err != nil {
			return g, nil, nil, err
		}
		if g.k < 2 {
			return g, nil, nil, fmt.Errorf("%w: grouped chunk with one group", ErrCorrupt)
		}
	}
	if !g.masked {
		return g, nil, src, nil
	}
	rs := &ps.route
	rs.mask = grow(rs.mask, (n+7)/8)
	if src, err = ps.decodeMask(rs.mask, src, zstdInto); err != nil {
		return g, nil, nil, err
	}
	if n&7 != 0 && rs.mask[len(rs.mask)-1]>>(n&7) != 0 {
		return g, nil, nil, fmt.Errorf("%w: mask bits past the last element", ErrCorrupt)
	}
	return g, rs.mask, src, nil
}

// groupSizes counts the elements of each group the planes hold, and their
// total.
func groupSizes(w, n int, ref, mask []byte, g *grouping, gt *[256]byte, kernels bool) ([maxGroups]int, int) {
	var cnt [maxGroups]int
	if kernels {
		thr := kernelThresholds(g)
		c4 := countGroups(w, ref, nil, mask, n&^7, 2, &thr)
		tailCounts(&c4, w, nil, ref, mask, n&^7, n, 2, gt)
		copy(cnt[:], c4[:])
	} else {
		cnt = groupCounts(ref, mask, n, w, gt)
	}
	m := 0
	for _, c := range cnt {
		m += c
	}
	return cnt, m
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

package encode

import "fmt"

// Grouped planes with the routing kernels (route_amd64.s): the elements are
// transformed and appended to their group's stream of words, and the
// streams are then cut into planes; decoding runs the other way. The
// leading multiple of 8 elements goes through the kernels, the rest
// through the scalar code here; the layout is the one group.go describes,
// whichever code wrote it.

// kernelThresholds gives the kernels' form of the thresholds: minus one,
// 0x7FFF (never exceeded by a context byte, as a 16- or 32-bit lane) for
// the groups not used.
func kernelThresholds(g *grouping) (thr [4]int32) {
	for i := range thr {
		thr[i] = 0x7FFF
		if i < g.k-1 {
			thr[i] = int32(g.thr[i]) - 1
		}
	}
	return thr
}

// kernelMask readies rs.mask for the kernels: all ones when the chunk has
// no mask (every element is coded).
func (rs *routeScratch) kernelMask(n int, masked bool) []byte {
	rs.mask = grow(rs.mask, (n+7)/8)
	if !masked {
		for i := range rs.mask {
			rs.mask[i] = 0xFF
		}
	}
	return rs.mask
}

func maskBit(mask []byte, i int) bool { return mask[i>>3]>>(i&7)&1 == 1 }

// tailCounts adds the elements from n8 on to the counts; with how 1 it
// first sets their mask bits from plain and ref.
func tailCounts(cnt *[4]int, w int, plain, ref, mask []byte, n8, n, how int, gt *[256]byte) {
	sh := ctxShift(w)
	if how == 1 && n8 < n {
		mask[n8>>3] = 0
	}
	for i := n8; i < n; i++ {
		r := loadWord(ref[i*w:], w)
		if how == 1 && loadWord(plain[i*w:], w) != r {
			mask[i>>3] |= 1 << (i & 7)
		}
		if maskBit(mask, i) {
			cnt[gt[byte(r>>sh)]]++
		}
	}
}

// routeEncode leaves the grouped planes in ps.buf (w planes of m bytes)
// and returns the mask (nil when the chunk has none) and the counts.
func (ps *planeScratch) routeEncode(w int, plain, ref []byte, n int, ch planeChoice, gt *[256]byte) ([]byte, [maxGroups]int, int) {
	rs := &ps.route
	g := &ch.grp
	thr := kernelThresholds(g)
	n8 := n &^ 7
	mask := rs.kernelMask(n, g.masked)
	how := 2
	if g.masked {
		how = 1
	}
	c4 := countGroups(w, ref, plain, mask, n8, how, &thr)
	tailCounts(&c4, w, plain, ref, mask, n8, n, how, gt)
	var cnt [maxGroups]int
	var start, cur [4]int
	m, acc := 0, 0
	for i, c := range c4 {
		cnt[i] = c
		m += c
		start[i], cur[i] = acc, acc
		acc += c + 8 // room for the kernel's whole-register stores
	}
	rs.words = grow(rs.words, (acc+8)*w)
	routeWords(w, rs.words, plain, ref, mask, n8, ch.mode, &thr, &cur)
	sh := ctxShift(w)
	var one [8]byte
	for i := n8; i < n; i++ {
		if !maskBit(mask, i) {
			continue
		}
		splitAny(one[:w], plain[i*w:(i+1)*w], ref[i*w:(i+1)*w], 1, w, ch.mode, ch.t)
		k := gt[byte(loadWord(ref[i*w:], w)>>sh)]
		copy(rs.words[cur[k]*w:], one[:w])
		cur[k]++
	}
	ps.buf = grow(ps.buf, m*w)
	off := 0
	for i := 0; i < g.k; i++ {
		wordsToPlanes(ps.buf[off:], m, rs.words[start[i]*w:], cnt[i], w)
		off += cnt[i]
	}
	if !g.masked {
		mask = nil
	}
	return mask, cnt, m
}

// routeDecode joins the grouped planes in ps.buf (m elements) into out.
func (ps *planeScratch) routeDecode(out []byte, w int, ref, mask []byte, n, m int, mode planeMode, g *grouping, cnt *[maxGroups]int, gt *[256]byte) error {
	rs := &ps.route
	thr := kernelThresholds(g)
	n8 := n &^ 7
	rs.words = grow(rs.words, (m+8)*w)
	var cur, end [4]int
	off := 0
	for i := 0; i < g.k; i++ {
		planesToWords(rs.words[off*w:], ps.buf[off:], m, cnt[i], w)
		cur[i] = off
		off += cnt[i]
		end[i] = off
	}
	unrouteWords(w, out, rs.words, ref, mask, n8, mode, &thr, &cur)
	sh := ctxShift(w)
	var one [8]byte
	for i := n8; i < n; i++ {
		o, r := out[i*w:(i+1)*w], ref[i*w:(i+1)*w]
		if !maskBit(mask, i) {
			copy(o, r)
			continue
		}
		k := gt[byte(loadWord(r, w)>>sh)]
		copy(one[:w], rs.words[cur[k]*w:])
		cur[k]++
		// One element's planes are its bytes in order.
		joinAny(o, one[:w], r, 1, w, mode, 0)
	}
	for i := 0; i < g.k; i++ {
		if cur[i] != end[i] {
			return fmt.Errorf("%w: group %d used %d of %d elements", ErrCorrupt, i, cur[i]-(end[i]-cnt[i]), cnt[i])
		}
	}
	return nil
}

// wordsToPlanes writes n w-byte words into w planes stride bytes apart.
func wordsToPlanes(pl []byte, stride int, words []byte, n, w int) {
	for k := transposeWords(pl, stride, words, n, w); k < n; k++ {
		for j := 0; j < w; j++ {
			pl[j*stride+k] = words[k*w+j]
		}
	}
}

func planesToWords(words, pl []byte, stride, n, w int) {
	for k := untransposeWords(words, pl, stride, n, w); k < n; k++ {
		for j := 0; j < w; j++ {
			words[k*w+j] = pl[j*stride+k]
		}
	}
}

package encode

// Choosing the planes transform per chunk. Coding a chunk three ways to keep
// the smallest would triple the encode time, so the choice is made on a
// sample: sampleElems elements spread over the chunk are transformed each
// way and the order-0 entropies of their planes compared. The low planes of
// float deltas are near-random whichever way, so the choice is decided by
// the high planes, where the sample's estimate is reliable. The same sample
// then prices a grouping (groupplan.go) for the best delta transform and
// for the baseline transform coded against the reference's contexts.
const sampleElems = 4096

// baseMargin: a baseline is chosen over a delta only when its estimate is
// this much smaller; it frees the chunk from its reference, but a wrong
// choice costs bytes on every later read-modify cycle too.
const baseMargin = 0.98

// groupMargin: a grouping is used only when the proxy says it saves at least
// this share; below, its extra tables and routing are not worth it.
const groupMargin = 0.99

// planReach: a transform whose plain estimate is this much above the best
// is not priced with groupings (they have never saved 10% on real data).
const planReach = 1.10

// planeChoice is how a chunk will be coded.
type planeChoice struct {
	mode planeMode
	t    uint
	grp  grouping // k == 1 and !masked: no grouping
}

func (c planeChoice) grouped() bool { return c.grp.k > 1 || c.grp.masked }

// delta reports whether the chunk needs its reference.
func (c planeChoice) delta() bool { return c.mode != modeBase || c.grouped() }

func (ps *planeScratch) chooseMode(dt DType, plain, ref []byte, n int) planeChoice {
	w := dt.Width()
	step := max(1, n/sampleElems)
	m := (n + step - 1) / step
	ps.sample = grow(ps.sample, 5*m*w)
	sp, sr := ps.sample[:m*w], ps.sample[m*w:2*m*w]
	// The sample's planes under each transform, kept for planGroups.
	var spl [3][]byte
	for i := range spl {
		spl[i] = ps.sample[(2+i)*m*w : (3+i)*m*w]
	}
	gather(sp, plain, w, step)
	if ref != nil {
		gather(sr, ref, w, step)
	}
	ch := planeChoice{mode: modeBase, grp: grouping{k: 1}}
	// The shift needs every element, but a sample with a low bit set
	// already proves it zero, which is the usual case.
	if w > 1 {
		if ref == nil {
			sr = nil
		}
		if ch.t = shiftOf(w, sp, sr, m); ch.t > 0 {
			ch.t = shiftOf(w, plain, ref, n)
		}
	}
	if ref == nil {
		return ch
	}
	cost := func(mode planeMode) float64 {
		pl := spl[mode]
		splitAny(pl, sp, sr, m, w, mode, ch.t)
		total := 0.0
		var h [256]uint32
		for j := 0; j < w; j++ {
			histogram(pl[j*m:(j+1)*m], &h)
			total += entropyBits(&h, m)
		}
		return total
	}
	// Order-0 estimates by transform, and the candidates: a plain
	// baseline's estimate is inflated by baseMargin, as it must win by that
	// much.
	est := [3]float64{modeBase: cost(modeBase), modeXOR: cost(modeXOR), modeSUB: cost(modeSUB)}
	cands := [5]candidate{
		{planeChoice{modeSUB, ch.t, grouping{k: 1}}, est[modeSUB]},
		{planeChoice{modeXOR, ch.t, grouping{k: 1}}, est[modeXOR]},
		{planeChoice{modeBase, ch.t, grouping{k: 1}}, est[modeBase] / baseMargin},
	}
	nc := 3
	if w > 1 {
		nc += ps.groupCandidates(cands[nc:], sp, sr, &spl, &est, m, w, ch.t, float64(n)/float64(m))
	}
	sortCandidates(cands[:nc])
	ps.bestEst, ps.alt = cands[0].est, cands[1]
	return cands[0].planeChoice
}

// groupCandidates prices groupings for the better delta transform and for
// the baseline transform, adds those estimated to save at least 1% to out
// and returns how many it added.
func (ps *planeScratch) groupCandidates(out []candidate, sp, sr []byte, spl *[3][]byte, est *[3]float64, m, w int, t uint, scale float64) int {
	delta := modeSUB
	if est[modeXOR] < est[modeSUB] {
		delta = modeXOR
	}
	best := min(est[delta], est[modeBase]/baseMargin)
	ctx, same, sameCount := ps.sampleContexts(sp, sr, m, w)
	k := 0
	for _, mode := range []planeMode{delta, modeBase} {
		c := est[mode]
		// Grouping saves a few percent; a transform that far behind
		// cannot win with it.
		if c > best*planReach {
			continue
		}
		g, e := ps.planGroups(spl[mode], ctx, same, sameCount, m, w, c, scale)
		if (g.k > 1 || g.masked) && e < groupMargin*c {
			out[k] = candidate{planeChoice{mode, t, g}, e}
			k++
		}
	}
	return k
}

// candidate is a way to code the chunk and its sample estimate.
type candidate struct {
	planeChoice
	est float64
}

func sortCandidates(c []candidate) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].est < c[j-1].est; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// sampleContexts gives the context byte of each sampled element's
// reference and whether the element equals it.
func (ps *planeScratch) sampleContexts(sp, sr []byte, m, w int) (ctx []byte, same []bool, sameCount int) {
	ps.sampleCtx = grow(ps.sampleCtx, m)
	if cap(ps.sampleSame) < m {
		ps.sampleSame = make([]bool, m)
	}
	ctx, same = ps.sampleCtx, ps.sampleSame[:m]
	sh := ctxShift(w)
	for k := 0; k < m; k++ {
		r := loadWord(sr[k*w:], w)
		ctx[k] = byte(r >> sh)
		same[k] = r == loadWord(sp[k*w:], w)
		if same[k] {
			sameCount++
		}
	}
	return ctx, same, sameCount
}

// planGroups prices groupings of the sample's planes spl, whose plain
// order-0 estimate is plainBits, and returns the best with its estimate.
func (ps *planeScratch) planGroups(spl, ctx []byte, same []bool, sameCount, m, w int, plainBits, scale float64) (grouping, float64) {
	gp := &ps.planner
	gp.tableBits = groupTableBits / scale
	var ctxHist [256]uint32
	for _, c := range ctx {
		ctxHist[c]++
	}
	gp.setAtoms(&ctxHist, m)
	switch w {
	case 2:
		p0, p1 := spl[:m], spl[m:2*m]
		for k, c := range ctx {
			gp.add(c, uint64(p0[k])|uint64(p1[k])<<8, same[k])
		}
	case 4:
		p0, p1, p2, p3 := spl[:m], spl[m:2*m], spl[2*m:3*m], spl[3*m:4*m]
		for k, c := range ctx {
			gp.add(c, uint64(p0[k])|uint64(p1[k])<<8|uint64(p2[k])<<16|uint64(p3[k])<<24, same[k])
		}
	default:
		for k, c := range ctx {
			var v uint64
			for j := 0; j < w; j++ {
				v |= uint64(spl[j*m+k]) << (8 * j)
			}
			gp.add(c, v, same[k])
		}
	}
	// The proxy prices groupings relative to plain planes; the planes' own
	// estimate gives the scale.
	g, p := gp.plan(false)
	best := plainBits * p / gp.plain(false)
	if sameCount == 0 {
		return g, best
	}
	// A mask is priced on the planes themselves: every plane of an
	// unchanged element costs something, which the proxy, counting an
	// element's length once, does not see.
	q := float64(sameCount) / float64(m)
	maskBits := 64.0
	changedBits := 0.0
	if sameCount < m {
		maskBits = -(q*fastLog2(q) + (1-q)*fastLog2(1-q)) * float64(m) * 1.1
		var h [256]uint32
		for j := 0; j < w; j++ {
			h = [256]uint32{}
			for k, b := range spl[j*m : (j+1)*m] {
				if !same[k] {
					h[b]++
				}
			}
			changedBits += entropyBits(&h, m-sameCount)
		}
	}
	gm, pm := gp.plan(true)
	if est := changedBits*pm/gp.plain(true) + maskBits; est < best {
		return gm, est
	}
	return g, best
}

// gather copies every step-th element of src (w-byte elements) into dst.
func gather(dst, src []byte, w, step int) {
	n := len(dst) / w
	switch w {
	case 1:
		for k := 0; k < n; k++ {
			dst[k] = src[k*step]
		}
	case 2:
		for k := 0; k < n; k++ {
			putLE16(dst[2*k:], le16(src[2*k*step:]))
		}
	case 4:
		for k := 0; k < n; k++ {
			putLE32(dst[4*k:], le32(src[4*k*step:]))
		}
	default:
		for k := 0; k < n; k++ {
			putLE64(dst[8*k:], le64(src[8*k*step:]))
		}
	}
}

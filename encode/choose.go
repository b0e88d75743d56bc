package encode

// Choosing the planes transform per chunk. Coding a chunk three ways to keep
// the smallest would triple the encode time, so the choice is made on a
// sample: sampleElems elements spread over the chunk are transformed each
// way and the order-0 entropies of their planes compared. The low planes of
// float deltas are near-random whichever way, so the choice is decided by
// the high planes, where the sample's estimate is reliable.
const sampleElems = 4096

// baseMargin: a baseline is chosen over a delta only when its estimate is
// this much smaller; it frees the chunk from its reference, but a wrong
// choice costs bytes on every later read-modify cycle too.
const baseMargin = 0.98

func (ps *planeScratch) chooseMode(dt DType, plain, ref []byte, n int) (planeMode, uint) {
	w := dt.Width()
	var t uint
	if w > 1 {
		t = shiftOf(w, plain, ref, n)
	}
	if ref == nil {
		return modeBase, t
	}
	step := max(1, n/sampleElems)
	m := (n + step - 1) / step
	ps.sample = grow(ps.sample, 3*m*w)
	sp, sr, spl := ps.sample[:m*w], ps.sample[m*w:2*m*w], ps.sample[2*m*w:]
	for i, k := 0, 0; i < n; i, k = i+step, k+1 {
		copy(sp[k*w:(k+1)*w], plain[i*w:])
		copy(sr[k*w:(k+1)*w], ref[i*w:])
	}
	cost := func(mode planeMode) float64 {
		splitAny(spl, sp, sr, m, w, mode, t)
		total := 0.0
		var h [256]uint32
		for j := 0; j < w; j++ {
			histogram(spl[j*m:(j+1)*m], &h)
			total += entropyBytes(&h, m)
		}
		return total
	}
	best, bestCost := modeSUB, cost(modeSUB)
	if c := cost(modeXOR); c < bestCost {
		best, bestCost = modeXOR, c
	}
	if c := cost(modeBase); c < baseMargin*bestCost {
		best = modeBase
	}
	return best, t
}

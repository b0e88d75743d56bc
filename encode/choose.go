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
	step := max(1, n/sampleElems)
	m := (n + step - 1) / step
	ps.sample = grow(ps.sample, 3*m*w)
	sp, sr, spl := ps.sample[:m*w], ps.sample[m*w:2*m*w], ps.sample[2*m*w:]
	gather(sp, plain, w, step)
	if ref != nil {
		gather(sr, ref, w, step)
	}
	var t uint
	// The shift needs every element, but a sample with a low bit set
	// already proves it zero, which is the usual case.
	if w > 1 {
		if ref == nil {
			sr = nil
		}
		if t = shiftOf(w, sp, sr, m); t > 0 {
			t = shiftOf(w, plain, ref, n)
		}
	}
	if ref == nil {
		return modeBase, t
	}
	cost := func(mode planeMode) float64 {
		splitAny(spl, sp, sr, m, w, mode, t)
		total := 0.0
		var h [256]uint32
		for j := 0; j < w; j++ {
			histogram(spl[j*m:(j+1)*m], &h)
			total += entropyBits(&h, m)
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

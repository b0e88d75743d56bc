package encode

import "math/bits"

// Choosing a grouping (group.go) from the mode sample. Trying groupings
// with the real coders would cost several encodes per chunk, so they are
// compared under a proxy: an element costs the entropy of its bit length
// (within its group) plus the bits below its leading one, raw. The proxy
// tracks what byte planes pay for mixing elements of different magnitude,
// which is what grouping by the reference's exponent removes; measured on
// the training series it picks thresholds as good as exact plane entropies.
//
// The context bytes of the sample are first merged, in order, into at most
// groupAtoms runs of similar size; a dynamic program then cuts the runs
// into at most maxPlanGroups groups minimising the proxy plus a table cost
// per group.
const (
	groupAtoms    = 16
	maxPlanGroups = 4
	// groupTableBits is the proxy's price of one more group's tables
	// (a huff0 table per plane), in bits of the whole chunk.
	groupTableBits = 4 * 40 * 8
)

// groupPlanner holds the sample statistics of one transform.
type groupPlanner struct {
	atomOf [256]byte
	first  [groupAtoms]byte // smallest context byte of each atom
	atoms  int
	// lens[a][L]: sampled elements of atom a whose transformed value has
	// bit length L; same[a][L]: those of them equal to their reference.
	lens, same [groupAtoms][65]uint32
	maxLen     int     // largest bit length seen
	tableBits  float64 // a group's tables, in sample bits
}

// setAtoms merges the context bytes present in the sample into runs.
func (gp *groupPlanner) setAtoms(ctxHist *[256]uint32, total int) {
	gp.atoms = 0
	acc := uint32(0)
	target := uint32(max(1, total/groupAtoms))
	for c := 0; c < 256; c++ {
		if gp.atoms == 0 && ctxHist[c] > 0 {
			gp.first[0], gp.atoms = byte(c), 1
		}
		if gp.atoms == 0 {
			continue
		}
		if acc >= target && ctxHist[c] > 0 && gp.atoms < groupAtoms {
			gp.first[gp.atoms] = byte(c)
			gp.atoms++
			acc = 0
		}
		gp.atomOf[c] = byte(gp.atoms - 1)
		acc += ctxHist[c]
	}
	if gp.atoms == 0 {
		gp.atoms = 1
	}
	gp.lens = [groupAtoms][65]uint32{}
	gp.same = [groupAtoms][65]uint32{}
	gp.maxLen = 0
}

func (gp *groupPlanner) add(ctx byte, v uint64, same bool) {
	a := gp.atomOf[ctx]
	l := bits.Len64(v)
	gp.maxLen = max(gp.maxLen, l)
	gp.lens[a][l]++
	if same {
		gp.same[a][l]++
	}
}

// proxyBits is the proxy cost, in sample bits, of atoms [a, b) as one
// group, with or without the elements equal to their reference.
func (gp *groupPlanner) proxyBits(a, b int, masked bool) float64 {
	var h [65]uint32
	total := uint32(0)
	raw := 0.0
	for k := a; k < b; k++ {
		for l := range h[:gp.maxLen+1] {
			c := gp.lens[k][l]
			if masked {
				c -= gp.same[k][l]
			}
			h[l] += c
			total += c
			if l > 1 {
				raw += float64(c) * float64(l-1)
			}
		}
	}
	if total == 0 {
		return 0
	}
	sum := 0.0
	for _, c := range h[:gp.maxLen+1] {
		if c > 1 {
			sum += nlog2n(c)
		}
	}
	return nlog2n(total) - sum + raw
}

// nlog2nTab[c] = c*log2(c) for the counts a sample can have.
var nlog2nTab = func() (t [sampleElems + 1]float64) {
	for c := 1; c < len(t); c++ {
		t[c] = float64(c) * fastLog2(float64(c))
	}
	return t
}()

func nlog2n(c uint32) float64 {
	if int(c) < len(nlog2nTab) {
		return nlog2nTab[c]
	}
	fc := float64(c)
	return fc * fastLog2(fc)
}

// plain is the proxy cost of a single group.
func (gp *groupPlanner) plain(masked bool) float64 {
	return gp.proxyBits(0, gp.atoms, masked) + gp.tableBits
}

// plan returns the best grouping under the proxy and its proxy cost, in
// sample bits with the tables.
func (gp *groupPlanner) plan(masked bool) (grouping, float64) {
	A := gp.atoms
	var cost [groupAtoms + 1][groupAtoms + 1]float64
	for a := 0; a < A; a++ {
		for b := a + 1; b <= A; b++ {
			cost[a][b] = gp.proxyBits(a, b, masked) + gp.tableBits
		}
	}
	// best[k][b]: cheapest cut of atoms [0, b) into k groups.
	var best [maxPlanGroups + 1][groupAtoms + 1]float64
	var from [maxPlanGroups + 1][groupAtoms + 1]int
	for k := 1; k <= maxPlanGroups; k++ {
		for b := 1; b <= A; b++ {
			best[k][b] = -1
			if k == 1 {
				best[k][b] = cost[0][b]
				continue
			}
			for a := k - 1; a < b; a++ {
				if best[k-1][a] < 0 {
					continue
				}
				if c := best[k-1][a] + cost[a][b]; best[k][b] < 0 || c < best[k][b] {
					best[k][b], from[k][b] = c, a
				}
			}
		}
	}
	bk := 1
	for k := 2; k <= min(maxPlanGroups, A); k++ {
		if best[k][A] >= 0 && best[k][A] < best[bk][A] {
			bk = k
		}
	}
	g := grouping{k: bk, masked: masked}
	b := A
	for k := bk; k > 1; k-- {
		a := from[k][b]
		g.thr[k-2] = gp.first[a]
		b = a
	}
	return g, best[bk][A]
}

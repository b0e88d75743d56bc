package chain

// The storage plan of a family for Repack: each file stored whole or as a
// delta against one of the few files saved just before it, so that the
// family stores the fewest bytes while no chain holds more than maxDepth
// deltas. That is ModelHub's PAS-PT problem (a tree of versions, each
// version's recreation cost bounded), restricted to references within a
// window of earlier saves. On training series the file before is the
// closest, but a file two or three saves back is nearly as close (adam:
// 0.53, 0.56, 0.58 of plain against 0.80 whole): several files can then
// share one baseline at depth 1 where a chain must alternate baselines and
// deltas, so trees store less at small bounds.

// maxPlanStates bounds the dynamic programme's states per file: the depths
// of the window's files, (maxDepth+1)^window of them.
const maxPlanStates = 1024

// defaultPlanWindow is how many earlier files a delta may reference unless
// told: the gain of a fifth file back is small (each step back costs a few
// percent of plain), and each costs a measuring encode per file.
const defaultPlanWindow = 4

// planWindow is the widest window up to want whose states stay within
// maxPlanStates at maxDepth; at least 1 (chains).
func planWindow(maxDepth, want int) int {
	if want < 1 {
		want = defaultPlanWindow
	}
	w, states := 0, 1
	for w < want && states*(maxDepth+1) <= maxPlanStates {
		w++
		states *= maxDepth + 1
	}
	return max(w, 1)
}

// planTree chooses each file's reference: -1 (stored whole) or the index
// of one of the window files just before it, whose depth is then below
// maxDepth. whole[i] is file i's size coded whole, delta[i][g-1] its size
// coded against file i-g (noCoding: it cannot be). It minimises the total
// size exactly, by a dynamic programme over the depths of the last window
// files (the state): O(files × states × window). It returns the references,
// the depths and the total.
func planTree(whole []int64, delta [][]int64, maxDepth, window int) ([]int, []int, int64) {
	n := len(whole)
	if n == 0 {
		return nil, nil, 0
	}
	base := maxDepth + 1 // a digit is a depth; maxDepth (or no file) cannot be referenced
	states := 1
	for range window {
		states *= base
	}
	// The state's digit g-1 (least significant first) is the depth of the
	// file g saves back.
	digit := func(s, g int) int {
		for ; g > 1; g-- {
			s /= base
		}
		return s % base
	}
	cost := make([]int64, states)
	next := make([]int64, states)
	for s := range cost {
		cost[s] = noCoding
	}
	cost[states-1] = 0 // every digit maxDepth: nothing to reference yet
	from := make([]int32, n*states)
	back := make([]int8, n*states) // 0: whole, g: against file i-g
	for i := 0; i < n; i++ {
		for s := range next {
			next[s] = noCoding
		}
		relax := func(s, depth, g int, c int64) {
			ns := (s*base)%states + depth
			if c < next[ns] {
				next[ns], from[i*states+ns], back[i*states+ns] = c, int32(s), int8(g)
			}
		}
		for s, c := range cost {
			if c >= noCoding {
				continue
			}
			relax(s, 0, 0, c+whole[i])
			for g := 1; g <= window && g <= i; g++ {
				d := digit(s, g)
				if d < maxDepth && delta[i][g-1] < noCoding {
					relax(s, d+1, g, c+delta[i][g-1])
				}
			}
		}
		cost, next = next, cost
	}
	end := 0
	for s := range cost {
		if cost[s] < cost[end] {
			end = s
		}
	}
	total := cost[end]
	refs := make([]int, n)
	for i, s := n-1, end; i >= 0; i-- {
		refs[i] = -1
		if g := int(back[i*states+s]); g > 0 {
			refs[i] = i - g
		}
		s = int(from[i*states+s])
	}
	depths := make([]int, n)
	for i, r := range refs {
		if r >= 0 {
			depths[i] = depths[r] + 1
		}
	}
	return refs, depths, total
}

// planParts cuts a planned sequence (refs: each file's reference as a
// position, -1 for none) where no delta crosses: the parts' [start, end)
// positions, newest first. A chain plan's parts are its chains.
func planParts(refs []int) [][2]int {
	var parts [][2]int
	for end := len(refs); end > 0; {
		start := end - 1
		for k := end - 1; k >= start; k-- {
			if refs[k] >= 0 {
				start = min(start, refs[k])
			}
		}
		parts = append(parts, [2]int{start, end})
		end = start
	}
	return parts
}

// maxPart is the most files in one part of a plan.
func maxPart(refs []int) int {
	most := 0
	for _, p := range planParts(refs) {
		most = max(most, p[1]-p[0])
	}
	return most
}

// maxLossyPart bounds the files a tier swaps in one transaction: a few
// chains' worth. Trees interleaved without a cut could join a family's
// whole sequence.
func maxLossyPart(maxDepth int) int {
	return 4 * (maxDepth + 1)
}

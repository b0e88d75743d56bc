package policy

import "github.com/ckptfs/ckptfs/meta"

// Candidate is the version of family f a new version would delta against
// under p (0: none, start a baseline): the family's last version under the
// progressive scheme, its baseline under the chain scheme.
func (p Policy) Candidate(f *meta.Family) meta.VersionID {
	if p.Scheme == ChainScheme {
		return f.Baseline
	}
	return f.Last
}

// Accept decides whether a new version of family f deltas against ref (the
// Candidate, still stored) or starts a new baseline. With a fixed snap_dis it
// follows the paper's Algorithm 2: a baseline, then snap_dis-1 deltas. With
// SnapDisAuto it follows Table 10's guidance:
//   - chain: the delta against the baseline grows with distance, so start a
//     new baseline once the last delta cost more than the group's average cost
//     per version so far: from then on, a new group is cheaper on average
//     (the online form of "the snap_dis with the smallest written volume").
//   - progressive: deltas do not grow with distance, so keep the group as long
//     as the storage constraint allows (MaxDepth versions, which also bounds
//     restore time), and restart only if a delta costs about as much as a
//     baseline, i.e. delta coding stopped paying.
func (p Policy) Accept(f *meta.Family, ref *meta.Version) bool {
	if p.SnapDis != SnapDisAuto {
		if p.Scheme == Progressive {
			// The reference's depth counts the deltas since its baseline,
			// whichever family it came from (a renamed file, a layout
			// match); for a family's last version it equals SinceBaseline.
			return int(ref.Depth)+1 < p.SnapDis
		}
		return int(f.SinceBaseline)+1 < p.SnapDis
	}
	if int(ref.Depth)+1 > p.MaxDepth {
		return false
	}
	return f.SinceBaseline == 0 || !deltaStoppedPaying(f, p.Scheme)
}

func deltaStoppedPaying(f *meta.Family, scheme Scheme) bool {
	if f.BaselineSize <= 0 || f.LastSize <= 0 {
		return true
	}
	// Compare bytes per logical byte, so a model that changed size is judged
	// by its coding efficiency.
	baseline := float64(f.BaselineBytes) / float64(f.BaselineSize)
	last := float64(f.LastBytes) / float64(f.LastSize)
	if scheme == ChainScheme {
		group := float64(f.BaselineBytes+f.DeltaBytes) / float64(f.BaselineSize) / float64(f.SinceBaseline+1)
		return last > group
	}
	return last >= 0.9*baseline
}

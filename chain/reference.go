package chain

import (
	"errors"

	"github.com/ckptfs/ckptfs/meta"
)

// chooseReference picks the version a new version of family deltas against,
// or nil for a new baseline. With a fixed snap_dis it follows the paper's
// Algorithm 2: a baseline, then snap_dis-1 deltas. With SnapDisAuto it
// follows Table 10's guidance:
//   - chain: the delta against the baseline grows with distance, so start a
//     new baseline once the last delta cost more than the group's average cost
//     per version so far: from then on, a new group is cheaper on average
//     (the online form of "the snap_dis with the smallest written volume").
//   - progressive: deltas do not grow with distance, so keep the group as long
//     as the storage constraint allows (MaxDepth versions, which also bounds
//     restore time), and restart only if a delta costs about as much as a
//     baseline, i.e. delta coding stopped paying.
func (s *Store) chooseReference(tx *meta.Tx, family string) (*meta.Version, error) {
	f, err := tx.Family(family)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := s.Policy()
	cand := f.Last
	if p.Scheme == ChainScheme {
		cand = f.Baseline
	}
	if cand == 0 {
		return nil, nil
	}
	ref, err := tx.Version(cand)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil // freed since: start afresh
	}
	if err != nil {
		return nil, err
	}
	if p.SnapDis != SnapDisAuto {
		if int(f.SinceBaseline)+1 >= p.SnapDis {
			return nil, nil
		}
		return ref, nil
	}
	if int(ref.Depth)+1 > p.MaxDepth {
		return nil, nil
	}
	if f.SinceBaseline > 0 && deltaStoppedPaying(f, p.Scheme) {
		return nil, nil
	}
	return ref, nil
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

package chain

import (
	"errors"

	"github.com/ckptfs/ckptfs/meta"
)

// chooseReference picks the version a new version of family deltas against
// under the current policy, or nil for a new baseline.
func (s *Store) chooseReference(tx *meta.Tx, family string) (*meta.Version, error) {
	f, err := tx.Family(family)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := s.Policy()
	cand := p.Candidate(f)
	if cand == 0 {
		return nil, nil
	}
	ref, err := tx.Version(cand)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil // freed since: start afresh
	}
	if err != nil || !p.Accept(f, ref) {
		return nil, err
	}
	return ref, nil
}

package chain

import (
	"errors"
	"path"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode/detect"
	"github.com/ckptfs/ckptfs/meta"
)

// refQuery is what chooseReference knows of a file whose tensors are about
// to arrive.
type refQuery struct {
	path   string         // its name now
	family string         // policy.FamilyOf(path)
	layout detect.Layout  // the tensors it declared, if its format declares them
	prev   meta.VersionID // the content it replaces when rewritten in place
}

// maxLayoutScan bounds the families looked at when searching a tree for a
// layout, so that a store with very many families never makes a save slow.
const maxLayoutScan = 4096

// chooseReference picks the version a new version deltas against, and
// why, or nil for a new baseline. In order (docs/REFERENCES.md):
//
//  1. same-file: a file rewritten in place (open with O_TRUNC, truncate to
//  0. is coded against its own previous content;
//  2. family: the last version of the path's family, if its layout is the
//     same (or either is unknown);
//  3. layout: the most recent last version of any family in the same tree
//     (the file's grandparent directory) with the same declared tensor
//     layout, never a sibling shard of the file's own series (a temporary
//     name, a final/ copy of the last checkpoint);
//  4. family: the family's last version even with another layout (a model
//     that grew keeps the tensors it shares).
//
// The policy (snap_dis, scheme) then decides, on the chosen series, whether
// to delta or to start a baseline.
func (s *Store) chooseReference(tx *meta.Tx, q refQuery) (*meta.Version, string, error) {
	p := s.Policy()
	if q.prev != 0 {
		prev, err := versionOrNil(tx, q.prev)
		if err != nil {
			return nil, "", err
		}
		if prev != nil {
			f, err := familyOrEmpty(tx, prev.Family)
			if err != nil {
				return nil, "", err
			}
			cand := prev
			if p.Scheme == policy.ChainScheme {
				if cand, err = versionOrNil(tx, f.Baseline); err != nil || cand == nil {
					return nil, "", err
				}
			}
			if !p.Accept(f, cand) {
				return nil, "", nil
			}
			return cand, meta.RefSameFile, nil
		}
	}
	f, err := familyOrEmpty(tx, q.family)
	if err != nil {
		return nil, "", err
	}
	last, err := versionOrNil(tx, f.Last)
	if err != nil {
		return nil, "", err
	}
	if last != nil && layoutCompatible(q.layout, last) {
		return s.acceptFrom(tx, f, meta.RefFamily)
	}
	if q.layout.Known() {
		lf, err := s.familyByLayout(tx, q)
		if err != nil {
			return nil, "", err
		}
		if lf != nil {
			return s.acceptFrom(tx, lf, meta.RefLayout)
		}
	}
	if last != nil {
		return s.acceptFrom(tx, f, meta.RefFamily)
	}
	return nil, "", nil
}

// acceptFrom applies the policy to family f's candidate.
func (s *Store) acceptFrom(tx *meta.Tx, f *meta.Family, reason string) (*meta.Version, string, error) {
	p := s.Policy()
	ref, err := versionOrNil(tx, p.Candidate(f))
	if err != nil || ref == nil || !p.Accept(f, ref) {
		return nil, "", err
	}
	return ref, reason, nil
}

// familyByLayout finds the family, in q's tree, whose last version declared
// the same tensors as q, most recent first.
func (s *Store) familyByLayout(tx *meta.Tx, q refQuery) (*meta.Family, error) {
	prefix := ""
	if tree := path.Dir(path.Dir(q.path)); tree != "." && tree != "/" && tree != "" {
		prefix = policy.FamilyOf(tree) + "/"
	}
	var best *meta.Family
	var bestID meta.VersionID
	scanned := 0
	err := tx.ForEachFamilyPrefix(prefix, func(f *meta.Family) error {
		if scanned++; scanned > maxLayoutScan {
			return errStopScan
		}
		if f.Name == q.family || f.Last <= bestID || policy.SiblingShards(f.Name, q.family) {
			return nil
		}
		v, err := versionOrNil(tx, f.Last)
		if err != nil || v == nil {
			return err
		}
		if v.LayoutTensors == uint32(q.layout.Tensors) && v.Layout == q.layout.Sum {
			best, bestID = f, v.ID
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return nil, err
	}
	return best, nil
}

var errStopScan = errors.New("stop scan")

// layoutCompatible reports whether a file declaring layout l may delta
// against v: the same declared tensors, or a layout one of them lacks.
func layoutCompatible(l detect.Layout, v *meta.Version) bool {
	return !l.Known() || v.LayoutTensors == 0 || (v.Layout == l.Sum && v.LayoutTensors == uint32(l.Tensors))
}

func versionOrNil(tx *meta.Tx, id meta.VersionID) (*meta.Version, error) {
	if id == 0 {
		return nil, nil
	}
	v, err := tx.Version(id)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil // freed since: start afresh
	}
	return v, err
}

func familyOrEmpty(tx *meta.Tx, name string) (*meta.Family, error) {
	f, err := tx.Family(name)
	if errors.Is(err, meta.ErrNotFound) {
		return &meta.Family{Name: name}, nil
	}
	return f, err
}

package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/meta"
)

// tierFamilyOnline applies a tier to one family of a mounted store (a
// mount's --tier): the files outside the exact tier become lossy, each
// re-coded against the reference it has, so chains keep their shape and
// depth and nothing is measured to plan. Forward deltas make a file's
// bytes something newer files decode through, so a file is tiered only
// once no exact file depends on it, directly or through others: a chain
// is tiered when its newest file leaves the exact tier, and no exact file
// is ever rebased for it, except the every ExactEvery-th file, which is
// re-coded whole once (losslessly) so that the files around it can go. A
// file in use (Busy), or one whose reads decode a version in use, waits
// for a later pass (errBusy).
func (s *Store) tierFamilyOnline(name string, fam *familyVersions, o RepackOptions, rep *RepackReport) (*RepackFamily, error) {
	files := fam.files
	row := &RepackFamily{Name: name, Files: len(files), StoredBefore: fam.stored, Kept: true}
	var all map[meta.VersionID]*meta.Version
	var dependents map[meta.VersionID][]meta.VersionID
	err := s.view(func(tx *txn) error {
		var err error
		all, dependents, err = tx.versionGraph()
		return err
	})
	if err != nil {
		return row, fmt.Errorf("tier %s: %w", name, err)
	}
	plans := make([]filePlan, len(files))
	index := make(map[meta.VersionID]int, len(files))
	candidate := map[meta.VersionID]bool{}
	keptEvery := map[meta.VersionID]bool{}
	busy := false
	for i, v := range files {
		index[v.ID] = i
		plans[i] = filePlan{v: v, ref: -1, want: v.Ref, depth: int(v.Depth)}
		switch {
		case v.Fidelity != "":
			plans[i].lossy = true
		case i >= len(files)-o.ExactNewest:
		case o.keepsExact(i, len(files)):
			keptEvery[v.ID] = true
		case v.TensorBytes == 0 || !tierableFormats[v.Format]:
		case o.Busy != nil && o.Busy(v.Ino):
			busy = true
		default:
			candidate[v.ID] = true
		}
	}
	// A candidate waits while something it cannot change under depends
	// on it: a version neither tiering nor lossy nor rebased, or a lossy
	// one of another family or hidden (only the family's files are
	// re-coded against its new bytes). Whether a zip's directory can be
	// patched is read only for the candidates left: a file whose chain
	// is still exact is asked again at every pass.
	asked := map[meta.VersionID]bool{}
	for {
		for changed := true; changed; {
			changed = false
			for id := range candidate {
				for _, d := range dependents[id] {
					_, inFamily := index[d]
					if candidate[d] || keptEvery[d] || inFamily && all[d].Fidelity != "" {
						continue
					}
					delete(candidate, id)
					changed = true
					break
				}
			}
		}
		dropped := false
		for id := range candidate {
			if asked[id] {
				continue
			}
			asked[id] = true
			ok, members, err := s.tierable(*all[id])
			if err != nil {
				return row, tierErr(name, err)
			}
			if !ok {
				delete(candidate, id) // stays exact: the files it decodes through too
				row.Untierable++
				dropped = true
				continue
			}
			p := &plans[index[id]]
			p.zip = members
			if p.moments, err = s.tierMoments(p.v, members, o); err != nil {
				return row, tierErr(name, err)
			}
		}
		if !dropped {
			break
		}
	}
	for i := range plans {
		p := &plans[i]
		if candidate[p.v.ID] {
			p.lossy, p.tiering = true, true
			row.Tiered++
		} else {
			p.zip = nil
		}
	}
	for i := range plans {
		p := &plans[i]
		if r, ok := index[p.v.Ref]; ok {
			p.ref = r
		}
		if keptEvery[p.v.ID] && p.ref >= 0 && plans[p.ref].tiering {
			p.want, p.ref, p.depth = 0, -1, 0 // rebased whole
		}
	}
	var lossySeq []int
	for i, p := range plans {
		if p.lossy {
			lossySeq = append(lossySeq, i)
			row.Lossy++
		}
	}
	if row.Tiered == 0 {
		if busy {
			return row, fmt.Errorf("a file is open: %w", errBusy)
		}
		return row, nil
	}
	row.Kept = false
	// A zip's CRCs change with its bytes: measured by coding it as it
	// will be coded (its reference's bytes change too, where it tiers).
	for _, i := range lossySeq {
		p := &plans[i]
		if !p.tiering || p.zip == nil {
			continue
		}
		zc := newZipCRCs(p.zip)
		var ref *filePlan
		if p.ref >= 0 {
			ref = &plans[p.ref]
		}
		opts := o.lossyOptions(p, ref)
		opts.observe, opts.background = zc.observe, true
		if _, err := s.codingSize(p.v, p.want, opts, rep); err != nil {
			return row, tierErr(name, err)
		}
		p.patches = zc.patches()
	}
	for i, p := range plans {
		if !p.lossy && p.want != p.v.Ref {
			if err := s.recodeAndSwap(p.v, p.want, recodeOptions{background: true}, o, rep, row); err != nil {
				return row, tierErr(name, err)
			}
			plans[i].v.Ref = p.want
		}
	}
	if err := s.applyLossy(plans, lossySeq, o, rep, row); err != nil {
		return row, tierErr(name, err)
	}
	if busy {
		return row, fmt.Errorf("a file is open: %w", errBusy)
	}
	return row, nil
}

// tierErr says which family a pass stopped in. A version gone meanwhile
// (a file deleted or rewritten) is a family to look at again later.
func tierErr(name string, err error) error {
	if errors.Is(err, meta.ErrNotFound) && !errors.Is(err, errBusy) {
		err = fmt.Errorf("%w (%w)", errBusy, err)
	}
	return fmt.Errorf("tier %s: %w", name, err)
}

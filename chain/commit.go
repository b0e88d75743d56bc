package chain

import (
	"fmt"

	"github.com/ckptfs/ckptfs/chain/policy"

	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// Size is the version's size in bytes.
func (p *pendingVersion) Size() int64 { return p.v.Size }

// commit makes p the content of inode ino in one transaction: the version,
// its segments and chunks, its pages, the family's chain, the old content's
// release and the shadow's writes. If it fails, nothing changed and the
// caller should Discard p.
func (s *Store) commit(ino meta.Ino, p *pendingVersion, change wear.Change, mtime int64) error {
	err := s.updateLogged(func(tx *txn) error { return tx.commitVersion(ino, p, change, mtime) })
	if p.pinned != 0 {
		s.unpin(p.pinned)
		p.pinned = 0
	}
	if err != nil {
		return fmt.Errorf("commit version of inode %d: %w", ino, err)
	}
	return nil
}

// discard gives back the pages of a pending version that will not be
// committed.
func (s *Store) discard(p *pendingVersion) {
	s.refs.DropVersion(p.v.ID)
	s.data.Release(p.v.Pack)
	p.v.Pack = nil
	if p.pinned != 0 {
		s.unpin(p.pinned)
		p.pinned = 0
	}
}

// contentCtime is the ctime a commit of content modified at mtime records:
// the inode changed when its content did, not when the store got to
// encode it, so stat shows the same ctime before and after a background
// commit; a change recorded since (chmod, utimens of a staged file) keeps
// its later ctime.
func contentCtime(ctime, mtime int64) int64 { return max(ctime, mtime) }

func (tx *txn) commitVersion(ino meta.Ino, p *pendingVersion, change wear.Change, mtime int64) error {
	n, err := tx.mtx.Inode(ino)
	if err != nil {
		return err
	}
	v := p.v
	v.Ino, v.Live = ino, true
	if v.Ref != 0 {
		ref, err := tx.mtx.Version(v.Ref)
		if err != nil {
			return fmt.Errorf("reference %d vanished while pinned: %w", v.Ref, err)
		}
		ref.Dependents++
		if err := tx.mtx.PutVersion(ref); err != nil {
			return err
		}
	}
	if err := tx.s.data.Commit(tx.mtx, v.Pack); err != nil {
		return err
	}
	if err := tx.mtx.PutVersion(&v); err != nil {
		return err
	}
	if fn := tx.s.committed; fn != nil {
		tx.mtx.OnCommit(func() { fn(v.ID, v.Size) })
	}
	for i := range p.segments {
		if err := tx.mtx.PutSegment(v.ID, &p.segments[i]); err != nil {
			return err
		}
	}
	for i := range p.chunks {
		if err := tx.mtx.PutChunk(v.ID, &p.chunks[i]); err != nil {
			return err
		}
	}
	old := n.Version
	if mtime == 0 {
		mtime = tx.s.now().UnixNano()
	}
	n.Version, n.Size, n.Mtime, n.Ctime = v.ID, v.Size, mtime, contentCtime(n.Ctime, mtime)
	if err := tx.mtx.PutInode(n); err != nil {
		return err
	}
	if old != 0 {
		if err := tx.releaseVersion(old, liveClaim); err != nil {
			return err
		}
	}
	if err := tx.advanceFamily(&v); err != nil {
		return err
	}
	if err := tx.noteVersionID(v.ID); err != nil {
		return err
	}
	// Every save streams: "fallback_versions" counts only the saves of
	// stores written by releases that had the fallback (see Report).
	for name, d := range map[string]int64{"versions_committed": 1, "streamed_versions": 1, "logical_bytes": v.Size,
		"stored_bytes": v.PackBytes, "pack_bytes_written": v.PackBytes, "pack_pages_written": v.PackPages()} {
		if err := tx.mtx.AddCounter(name, d); err != nil {
			return err
		}
	}
	return tx.shadowCommit(ino, change, v.Size)
}

// advanceFamily records v as the family's newest version. A version coded
// against another family's version (a layout match, a renamed file)
// continues that family's series: its group's baseline and costs come along,
// so that snap_dis and the auto policy count the chain it is really in.
func (tx *txn) advanceFamily(v *meta.Version) error {
	f, err := familyOrEmpty(tx.mtx, v.Family)
	if err != nil {
		return err
	}
	if v.Ref != 0 {
		ref, err := versionOrNil(tx.mtx, v.Ref)
		if err != nil {
			return err
		}
		if ref != nil && ref.Family != v.Family {
			rf, err := familyOrEmpty(tx.mtx, ref.Family)
			if err != nil {
				return err
			}
			continueSeries(f, rf)
		}
	}
	f.Last, f.LastSize, f.LastBytes = v.ID, v.Size, v.PackBytes
	f.Versions++
	if v.Ref == 0 {
		f.Baseline, f.SinceBaseline = v.ID, 0
		f.BaselineSize, f.BaselineBytes, f.DeltaBytes = v.Size, v.PackBytes, 0
	} else {
		f.SinceBaseline++
		f.DeltaBytes += v.PackBytes
	}
	return tx.mtx.PutFamily(f)
}

// continueSeries makes f continue from's series: the group's length and
// costs (f keeps its name and its count of versions). The baseline's number
// stays with its own family: a family only ever points at its own versions,
// which freeVersion clears when they go.
func continueSeries(f, from *meta.Family) {
	f.Baseline, f.SinceBaseline = 0, from.SinceBaseline
	f.BaselineSize, f.BaselineBytes, f.DeltaBytes = from.BaselineSize, from.BaselineBytes, from.DeltaBytes
}

// Adopt moves inode ino's committed content into the family of its new
// name: the next save under that name is coded against it. Content without
// tensors is left where it is (nothing is ever coded against raw bytes), so
// renaming small files writes no metadata.
func (s *Store) Adopt(ino meta.Ino, path string) error {
	need := false
	err := s.view(func(tx *txn) error {
		n, err := tx.mtx.Inode(ino)
		if err != nil || n.Version == 0 {
			return err
		}
		v, err := versionOrNil(tx.mtx, n.Version)
		need = err == nil && v != nil && v.TensorBytes > 0 && v.Path != path
		return err
	})
	if err != nil || !need {
		return err
	}
	return s.update(func(tx *txn) error {
		n, err := tx.mtx.Inode(ino)
		if err != nil || n.Version == 0 {
			return err
		}
		v, err := versionOrNil(tx.mtx, n.Version)
		if err != nil || v == nil {
			return err
		}
		old, err := familyOrEmpty(tx.mtx, v.Family)
		if err != nil {
			return err
		}
		if old.Last == v.ID || old.Baseline == v.ID {
			// The version leaves its family, which must not point at it.
			moved := *old
			if moved.Last == v.ID {
				moved.Last = 0
			}
			if moved.Baseline == v.ID {
				moved.Baseline = 0
			}
			if err := tx.mtx.PutFamily(&moved); err != nil {
				return err
			}
		}
		v.Path, v.Family = path, policy.FamilyOf(path)
		if err := tx.mtx.PutVersion(v); err != nil {
			return err
		}
		f, err := familyOrEmpty(tx.mtx, v.Family)
		if err != nil || f.Last >= v.ID {
			return err // the new name's series has a newer save already
		}
		continueSeries(f, old)
		if v.Ref == 0 {
			f.Baseline, f.SinceBaseline = v.ID, 0
			f.BaselineSize, f.BaselineBytes, f.DeltaBytes = v.Size, v.PackBytes, 0
		}
		f.Last, f.LastSize, f.LastBytes = v.ID, v.Size, v.PackBytes
		f.Versions++
		return tx.mtx.PutFamily(f)
	})
}

// noteVersionID keeps the stored next_version counter at or above id, so
// that a reopened store numbers its versions after every one it holds.
func (tx *txn) noteVersionID(id meta.VersionID) error {
	if tx.mtx.Counter("next_version") >= uint64(id) {
		return nil
	}
	return tx.mtx.SetCounter("next_version", uint64(id))
}

package chain

import (
	"errors"
	"fmt"

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
	err := s.update(func(tx *txn) error { return tx.commitVersion(ino, p, change, mtime) })
	s.unregisterPending(p)
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
	s.unregisterPending(p)
	s.refs.DropVersion(p.v.ID)
	s.data.Release(p.v.Pack)
	p.v.Pack = nil
	if p.pinned != 0 {
		s.unpin(p.pinned)
		p.pinned = 0
	}
}

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
	n.Version, n.Size, n.Mtime, n.Ctime = v.ID, v.Size, mtime, tx.s.now().UnixNano()
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
	if tx.mtx.Counter("next_version") < uint64(v.ID) {
		if err := tx.mtx.SetCounter("next_version", uint64(v.ID)); err != nil {
			return err
		}
	}
	for name, d := range map[string]int64{"versions_committed": 1, "logical_bytes": v.Size,
		"stored_bytes": v.PackBytes, "pack_bytes_written": v.PackBytes, "pack_pages_written": v.PackPages()} {
		if err := tx.mtx.AddCounter(name, d); err != nil {
			return err
		}
	}
	return tx.shadowCommit(ino, change, v.Size)
}

// advanceFamily records v as the family's newest version.
func (tx *txn) advanceFamily(v *meta.Version) error {
	f, err := tx.mtx.Family(v.Family)
	if errors.Is(err, meta.ErrNotFound) {
		f, err = &meta.Family{Name: v.Family}, nil
	}
	if err != nil {
		return err
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

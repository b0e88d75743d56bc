package chain

import (
	"fmt"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// VersionRecords are what another store says of one of its versions: the
// version and the records it is read by. The pack is wherever locate (in
// ReplaceTree) says.
type VersionRecords struct {
	Version  meta.Version
	Segments []meta.Segment
	Chunks   []meta.Chunk
}

// ReplaceTree makes the metadata in db the tree t and the versions it
// names, in one transaction (a replica following its bucket, chain/remote).
// Names that went are unlinked and inodes that went deleted, except those
// inUse reports (open, or known to the kernel), which stay as orphans with
// their versions until the kernel forgets them, as an unlinked file on any
// filesystem. A version db does not hold yet is recorded from versions,
// its pack at locate's location. It returns the versions and inodes the
// metadata keeps.
func ReplaceTree(db *meta.DB, t Tree, versions map[meta.VersionID]*VersionRecords,
	locate func(v *meta.Version) (storage.Location, error), inUse func(meta.Ino) bool) (kept map[meta.VersionID]bool, inodes map[meta.Ino]bool, err error) {
	kept, inodes = map[meta.VersionID]bool{}, map[meta.Ino]bool{}
	err = db.Update(func(tx *meta.Tx) error {
		if err := replaceNames(tx, t.Dirents); err != nil {
			return err
		}
		// Inodes: the tree's, and the orphans kept for their users.
		want := make(map[meta.Ino]bool, len(t.Inodes))
		for i := range t.Inodes {
			want[t.Inodes[i].Ino] = true
		}
		holds := map[meta.VersionID]bool{}
		var old []meta.Inode
		if err := tx.ForEachInode(func(n *meta.Inode) error { old = append(old, *n); return nil }); err != nil {
			return err
		}
		var maxIno meta.Ino
		for i := range old {
			n := &old[i]
			maxIno = max(maxIno, n.Ino)
			if want[n.Ino] {
				continue
			}
			if inUse != nil && inUse(n.Ino) {
				if n.Nlink != 0 {
					n.Nlink = 0
					if err := tx.PutInode(n); err != nil {
						return err
					}
					if err := tx.MarkOrphan(n.Ino); err != nil {
						return err
					}
				}
				holds[n.Version] = true
				inodes[n.Ino] = true
				continue
			}
			if err := tx.DeleteInode(n.Ino); err != nil {
				return err
			}
		}
		xattrs := t.xattrsByIno()
		for i := range t.Inodes {
			n := &t.Inodes[i]
			inodes[n.Ino] = true
			maxIno = max(maxIno, n.Ino)
			if err := tx.PutInode(n); err != nil {
				return err
			}
			if err := tx.UnmarkOrphan(n.Ino); err != nil {
				return err
			}
			holds[n.Version] = true
			if err := setXattrs(tx, n.Ino, xattrs[n.Ino]); err != nil {
				return err
			}
		}
		// Versions: the tree's and what orphans need, each with the
		// versions it is coded against.
		olds := map[meta.VersionID]*meta.Version{}
		if err := tx.ForEachVersion(func(v *meta.Version) error { c := *v; olds[v.ID] = &c; return nil }); err != nil {
			return err
		}
		keep := func(id meta.VersionID) {
			for id != 0 && !kept[id] {
				if r := versions[id]; r != nil {
					kept[id] = true
					id = r.Version.Ref
				} else if v := olds[id]; v != nil {
					kept[id] = true
					id = v.Ref
				} else {
					return
				}
			}
		}
		for id := range versions {
			keep(id)
		}
		for id := range holds {
			keep(id)
		}
		deps := map[meta.VersionID]uint32{}
		for id := range kept {
			if ref := refOf(id, versions, olds); ref != 0 {
				deps[ref]++
			}
		}
		for id := range olds {
			if !kept[id] {
				if err := tx.DeleteVersion(id); err != nil {
					return err
				}
			}
		}
		var maxVersion meta.VersionID
		var logical, stored int64
		for id := range kept {
			var v meta.Version
			if old := olds[id]; old != nil {
				v = *old
			} else {
				r := versions[id]
				v = r.Version
				if v.Pack, err = locate(&r.Version); err != nil {
					return err
				}
				for i := range r.Segments {
					if err := tx.PutSegment(id, &r.Segments[i]); err != nil {
						return err
					}
				}
				for i := range r.Chunks {
					if err := tx.PutChunk(id, &r.Chunks[i]); err != nil {
						return err
					}
				}
			}
			v.Live, v.Dependents = holds[id], deps[id]
			if err := tx.PutVersion(&v); err != nil {
				return err
			}
			maxVersion = max(maxVersion, id)
			if v.Live {
				logical += v.Size
			}
			stored += v.PackBytes
		}
		for name, v := range map[string]uint64{"next_ino": uint64(maxIno), "next_version": uint64(maxVersion),
			"logical_bytes": uint64(logical), "stored_bytes": uint64(stored)} {
			if v < tx.Counter(name) && (name == "next_ino" || name == "next_version") {
				continue
			}
			if err := tx.SetCounter(name, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("replace the tree: %w", err)
	}
	return kept, inodes, nil
}

// refOf is the version id is coded against: as versions says, or else as
// the store's record old says.
func refOf(id meta.VersionID, versions map[meta.VersionID]*VersionRecords, olds map[meta.VersionID]*meta.Version) meta.VersionID {
	if r := versions[id]; r != nil {
		return r.Version.Ref
	}
	return olds[id].Ref
}

// replaceNames makes the directory entries in tx exactly want.
func replaceNames(tx *meta.Tx, want []Dirent) error {
	type entry struct {
		parent meta.Ino
		name   string
	}
	wanted := make(map[entry]meta.Ino, len(want))
	for _, d := range want {
		wanted[entry{d.Parent, d.Name}] = d.Child
	}
	have := map[entry]meta.Ino{}
	if err := tx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
		have[entry{parent, name}] = child
		return nil
	}); err != nil {
		return err
	}
	for e, child := range have {
		if wanted[e] != child {
			if err := tx.Unlink(e.parent, e.name); err != nil {
				return err
			}
		}
	}
	for e, child := range wanted {
		if have[e] != child {
			if err := tx.Link(e.parent, e.name, child); err != nil {
				return err
			}
		}
	}
	return nil
}

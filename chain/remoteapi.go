package chain

import (
	"errors"
	"fmt"
	"io"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// What a replica of the store (chain/remote) needs: to hear of commits, to
// hold versions while it copies them, and to read their packs.

// OnCommitted sets fn to be told of every committed version, after its
// transaction commits (nil: nobody). Set it before the store is served.
func (s *Store) OnCommitted(fn func(id meta.VersionID, size int64)) { s.committed = fn }

// hold runs fn on a snapshot of the metadata taken between two updates and
// pins the versions fn returns, so that none of them is freed (its pages
// handed out again) until release is called. Every version fn saw in the
// snapshot exists when hold returns.
func (s *Store) hold(fn func(tx *meta.Tx) ([]meta.VersionID, error)) (release func(), err error) {
	var ids []meta.VersionID
	err = s.db.ViewBetweenUpdates(func(tx *meta.Tx) error {
		var err error
		if ids, err = fn(tx); err != nil {
			return err
		}
		for _, id := range ids {
			s.pin(id)
		}
		return nil
	})
	if err != nil {
		for _, id := range ids {
			s.unpin(id)
		}
		return nil, err
	}
	return func() {
		for _, id := range ids {
			s.unpin(id)
		}
	}, nil
}

// Dirent is one name in a directory.
type Dirent struct {
	Parent meta.Ino `json:"parent"`
	Name   string   `json:"name"`
	Child  meta.Ino `json:"child"`
}

// Xattr is one extended attribute.
type Xattr struct {
	Ino   meta.Ino `json:"ino"`
	Name  string   `json:"name"`
	Value []byte   `json:"value"`
}

// Tree is a store's namespace: its inodes, their names and their
// extended attributes.
type Tree struct {
	Inodes  []meta.Inode
	Dirents []Dirent
	Xattrs  []Xattr
}

// Snapshot is the store at one moment: every version and the tree.
type Snapshot struct {
	Versions []meta.Version
	Tree
}

// HoldSnapshot takes a snapshot of the store between two updates and
// pins the versions pin selects, so that none of them is freed until
// release is called.
func (s *Store) HoldSnapshot(pin func(v *meta.Version) bool) (snap *Snapshot, release func(), err error) {
	release, err = s.hold(func(tx *meta.Tx) ([]meta.VersionID, error) {
		snap = &Snapshot{}
		var pinned []meta.VersionID
		err := tx.ForEachVersion(func(v *meta.Version) error {
			snap.Versions = append(snap.Versions, *v)
			if pin(v) {
				pinned = append(pinned, v.ID)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		err = tx.ForEachInode(func(n *meta.Inode) error {
			snap.Inodes = append(snap.Inodes, *n)
			for _, name := range tx.ListXattr(n.Ino) {
				if v, ok := tx.Xattr(n.Ino, name); ok {
					snap.Xattrs = append(snap.Xattrs, Xattr{Ino: n.Ino, Name: name, Value: v})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		err = tx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
			snap.Dirents = append(snap.Dirents, Dirent{Parent: parent, Name: name, Child: child})
			return nil
		})
		return pinned, err
	})
	if err != nil {
		return nil, nil, err
	}
	return snap, release, nil
}

// VersionRecords returns the records a version is read by: its segments
// and its chunks, in order.
func (s *Store) VersionRecords(id meta.VersionID) (segs []meta.Segment, chunks []meta.Chunk, err error) {
	err = s.db.View(func(tx *meta.Tx) error {
		var err error
		if segs, err = tx.Segments(id); err != nil {
			return err
		}
		return tx.ForEachChunk(id, func(c *meta.Chunk) error { chunks = append(chunks, *c); return nil })
	})
	return segs, chunks, err
}

// ReadPack fills p with the bytes at offset off of the pack kept at loc (a
// version's encoded chunks, meta.Version.Pack).
func (s *Store) ReadPack(loc storage.Location, p []byte, off int64) error {
	return s.data.ReadAt(loc, p, off)
}

// ImportVersion records a version copied from another store (ckptfs pull)
// under its own number, which must be free: its pack, read from pack, is
// written through the backend, and the version, its segments and chunks
// and its family's chain recorded in one transaction. Import versions in
// ascending order (references first), then the tree with ImportTree.
func (s *Store) ImportVersion(v meta.Version, segs []meta.Segment, chunks []meta.Chunk, pack io.Reader) error {
	pw := newPackWriter(s)
	buf := make([]byte, 1<<20)
	for {
		n, err := pack.Read(buf)
		if n > 0 {
			if _, aerr := pw.Append(buf[:n]); aerr != nil {
				pw.Abort()
				return fmt.Errorf("import version %d: %w", v.ID, aerr)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			pw.Abort()
			return fmt.Errorf("import version %d: %w", v.ID, err)
		}
	}
	loc, size, err := pw.Finish()
	if err != nil {
		pw.Abort()
		return fmt.Errorf("import version %d: %w", v.ID, err)
	}
	if size != v.PackBytes {
		pw.Abort()
		return fmt.Errorf("import version %d: pack of %d bytes, its record says %d", v.ID, size, v.PackBytes)
	}
	v.Pack = loc
	err = s.update(func(tx *txn) error {
		if old, err := versionOrNil(tx.mtx, v.ID); err != nil || old != nil {
			return errors.Join(err, fmt.Errorf("version %d exists already", v.ID))
		}
		if err := s.data.Commit(tx.mtx, loc); err != nil {
			return err
		}
		if err := tx.mtx.PutVersion(&v); err != nil {
			return err
		}
		for i := range segs {
			if err := tx.mtx.PutSegment(v.ID, &segs[i]); err != nil {
				return err
			}
		}
		for i := range chunks {
			if err := tx.mtx.PutChunk(v.ID, &chunks[i]); err != nil {
				return err
			}
		}
		if err := tx.advanceFamily(&v); err != nil {
			return err
		}
		if err := tx.noteVersionID(v.ID); err != nil {
			return err
		}
		return tx.mtx.AddCounter("stored_bytes", v.PackBytes)
	})
	if err != nil {
		s.data.Release(loc)
		return fmt.Errorf("import version %d: %w", v.ID, err)
	}
	for s.nextVersion.Load() < uint64(v.ID) {
		s.nextVersion.Store(uint64(v.ID))
	}
	return nil
}

// ImportTree records the tree of a store copied from elsewhere, in one
// transaction, after its versions (ImportVersion).
func (s *Store) ImportTree(t Tree) error {
	return s.update(func(tx *txn) error {
		xattrs := t.xattrsByIno()
		var maxIno meta.Ino
		for i := range t.Inodes {
			n := &t.Inodes[i]
			maxIno = max(maxIno, n.Ino)
			if err := tx.mtx.PutInode(n); err != nil {
				return err
			}
			if err := setXattrs(tx.mtx, n.Ino, xattrs[n.Ino]); err != nil {
				return err
			}
		}
		for _, d := range t.Dirents {
			if err := tx.mtx.Link(d.Parent, d.Name, d.Child); err != nil {
				return err
			}
		}
		if tx.mtx.Counter("next_ino") < uint64(maxIno) {
			return tx.mtx.SetCounter("next_ino", uint64(maxIno))
		}
		return nil
	})
}

// Empty reports whether the store holds nothing but an empty root.
func (s *Store) Empty() (bool, error) {
	empty := true
	err := s.db.View(func(tx *meta.Tx) error {
		empty = tx.DirEmpty(meta.RootIno)
		return tx.ForEachVersion(func(*meta.Version) error { empty = false; return nil })
	})
	return empty, err
}

// xattrsByIno groups the tree's extended attributes by inode.
func (t *Tree) xattrsByIno() map[meta.Ino][]Xattr {
	out := map[meta.Ino][]Xattr{}
	for _, x := range t.Xattrs {
		out[x.Ino] = append(out[x.Ino], x)
	}
	return out
}

// setXattrs makes ino's extended attributes xs.
func setXattrs(tx *meta.Tx, ino meta.Ino, xs []Xattr) error {
	want := map[string]bool{}
	for _, x := range xs {
		want[x.Name] = true
		if err := tx.SetXattr(ino, x.Name, x.Value); err != nil {
			return err
		}
	}
	for _, name := range tx.ListXattr(ino) {
		if !want[name] {
			if _, err := tx.RemoveXattr(ino, name); err != nil {
				return err
			}
		}
	}
	return nil
}

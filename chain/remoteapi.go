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

// Hold runs fn on a snapshot of the metadata taken between two updates and
// pins the versions fn returns, so that none of them is freed (its pages
// handed out again) until release is called. Every version fn saw in the
// snapshot exists when Hold returns.
func (s *Store) Hold(fn func(tx *meta.Tx) ([]meta.VersionID, error)) (release func(), err error) {
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

// ReadPack fills p with the bytes at offset off of the pack kept at loc (a
// version's encoded chunks, meta.Version.Pack).
func (s *Store) ReadPack(loc storage.Location, p []byte, off int64) error {
	return s.data.ReadAt(loc, p, off)
}

// DB is the store's metadata database.
func (s *Store) DB() *meta.DB { return s.db }

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

// ImportTree records, in one transaction run by fn, the inodes, names
// and xattrs of a store copied from elsewhere, after its versions
// (ImportVersion).
func (s *Store) ImportTree(fn func(tx *meta.Tx) error) error {
	return s.update(func(tx *txn) error { return fn(tx.mtx) })
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

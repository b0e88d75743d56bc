package chain

import (
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

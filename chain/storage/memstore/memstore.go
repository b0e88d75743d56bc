// Package memstore keeps data in memory: a storage backend for tests, and
// the shape of an object store (each Write is one immutable object, named
// by a number, freed whole). Nothing survives the process.
package memstore

import (
	"fmt"
	"sync"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// Backend is an in-memory backend of at most a fixed number of blocks.
type Backend struct {
	blockSize int
	blocks    int64

	mu        sync.Mutex
	next      int64
	used      int64 // blocks held by reserved and committed objects
	objects   map[int64][]byte
	committed map[int64]bool
}

var _ storage.Backend = (*Backend)(nil)

// New makes a store of the given number of blocks of blockSize bytes.
func New(blockSize int, blocks int64) *Backend {
	return &Backend{blockSize: blockSize, blocks: blocks, next: 1,
		objects: map[int64][]byte{}, committed: map[int64]bool{}}
}

// BlockSize is the unit of space.
func (s *Backend) BlockSize() int { return s.blockSize }

// objectShift places object k's blocks at addresses k<<objectShift on, so
// that the runs of two objects never touch (see storage.Location).
const objectShift = 32

// Write keeps a copy of data as a new object: its location is one extent
// at the object's address whose Len is its blocks.
func (s *Backend) Write(data []byte) (storage.Location, error) {
	if len(data)%s.blockSize != 0 {
		return nil, fmt.Errorf("memstore: write of %d bytes is not whole blocks", len(data))
	}
	n := int64(len(data) / s.blockSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used+n > s.blocks {
		return nil, fmt.Errorf("memstore: %d blocks wanted, %d free: %w", n, s.blocks-s.used, storage.ErrNoSpace)
	}
	if n >= 1<<objectShift {
		return nil, fmt.Errorf("memstore: object of %d blocks too large", n)
	}
	id := s.next << objectShift
	s.next++
	s.used += n
	s.objects[id] = append([]byte(nil), data...)
	return storage.Location{{Start: id, Len: n}}, nil
}

// ReadAt reads [off, off+len(p)) of the objects of loc, in order.
func (s *Backend) ReadAt(loc storage.Location, p []byte, off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bs := int64(s.blockSize)
	for _, e := range loc {
		if len(p) == 0 {
			return nil
		}
		size := e.Len * bs
		if off >= size {
			off -= size
			continue
		}
		obj, ok := s.objects[e.Start]
		if !ok || int64(len(obj)) != size {
			return fmt.Errorf("memstore: no object %d of %d blocks", e.Start, e.Len)
		}
		c := copy(p, obj[off:])
		p, off = p[c:], 0
	}
	if len(p) > 0 {
		return fmt.Errorf("memstore: %d bytes past the location: %w", len(p), storage.ErrShortLocation)
	}
	return nil
}

// Commit marks the objects of loc as the store's once tx commits.
func (s *Backend) Commit(tx *meta.Tx, loc storage.Location) error {
	if err := s.known(loc, false); err != nil {
		return err
	}
	ids := ids(loc)
	tx.OnCommit(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, id := range ids {
			s.committed[id] = true
		}
	})
	return nil
}

// Free deletes the objects of loc once tx is durable, as a device's
// pages are handed out again only then.
func (s *Backend) Free(tx *meta.Tx, loc storage.Location) error {
	if err := s.known(loc, true); err != nil {
		return err
	}
	cp := append(storage.Location(nil), loc...)
	tx.OnDurable(func() { s.drop(cp) })
	return nil
}

// Release deletes objects that were never committed.
func (s *Backend) Release(loc storage.Location) { s.drop(loc) }

func (s *Backend) drop(loc storage.Location) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range loc {
		if _, ok := s.objects[e.Start]; ok {
			delete(s.objects, e.Start)
			delete(s.committed, e.Start)
			s.used -= e.Len
		}
	}
}

// known checks that every object of loc exists (and is committed, if
// committed is set).
func (s *Backend) known(loc storage.Location, committed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range loc {
		obj, ok := s.objects[e.Start]
		if !ok || int64(len(obj)) != e.Len*int64(s.blockSize) {
			return fmt.Errorf("memstore: no object %d of %d blocks", e.Start, e.Len)
		}
		if committed && !s.committed[e.Start] {
			return fmt.Errorf("memstore: object %d was never committed", e.Start)
		}
	}
	return nil
}

func ids(loc storage.Location) []int64 {
	out := make([]int64, len(loc))
	for i, e := range loc {
		out[i] = e.Start
	}
	return out
}

// Recover has nothing to do: memory does not survive a stop.
func (s *Backend) Recover(*meta.Tx, bool) error { return nil }

// Space is the store's blocks and the free ones.
func (s *Backend) Space() (total, free int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocks, s.blocks - s.used
}

// Check reports objects owned twice or by no one, and locations naming no
// object.
func (s *Backend) Check(_ *meta.Tx, used []storage.Owned, problem func(kind, format string, args ...any)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := map[int64]string{}
	for _, u := range used {
		if prev, ok := owner[u.Start]; ok {
			problem("overlap", "object %d is owned by %s and %s", u.Start, prev, u.Owner)
			continue
		}
		owner[u.Start] = u.Owner
		if obj, ok := s.objects[u.Start]; !ok || int64(len(obj)) != u.Len*int64(s.blockSize) {
			problem("missing", "%s names object %d of %d blocks, which the store does not hold", u.Owner, u.Start, u.Len)
		}
	}
	for id := range s.committed {
		if _, ok := owner[id]; !ok {
			problem("leak", "object %d is committed but owned by no version", id)
		}
	}
	return nil
}

// Sync has nothing to make durable.
func (s *Backend) Sync() error { return nil }

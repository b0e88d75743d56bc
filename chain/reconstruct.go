package chain

import (
	"errors"
	"fmt"
	"sort"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// ErrChecksum reports bytes that do not match the checksum recorded when
// they were written: the device content is damaged.
var ErrChecksum = errors.New("checksum mismatch")

// chunkPlain returns the plain bytes of the chunk of version id at file
// offset off, from the cache or rebuilt.
func (s *Store) chunkPlain(id meta.VersionID, off int64) ([]byte, error) {
	return s.cache.Get(plaincache.Key{V: id, Off: off}, func() ([]byte, error) { return s.rebuild(id, off) })
}

// rebuild decodes one chunk: its encoded bytes from the device, plus, for a
// delta, the reference chunk's plain bytes (rebuilt the same way).
func (s *Store) rebuild(id meta.VersionID, off int64) ([]byte, error) {
	lay, c, err := s.chunkRecord(id, off)
	if err != nil {
		return nil, err
	}
	if c.Zeros() {
		// A chunk of zeros is rebuilt only as a reference, and so has
		// the size of a tensor chunk; a hole's chunk never is one.
		if c.Delta || c.Length > maxZeroRebuild {
			return nil, fmt.Errorf("version %d chunk at %d: %d bytes of zeros as a reference: %w", id, off, c.Length, errCorruptManifest)
		}
		return make([]byte, c.Length), nil
	}
	enc, err := s.readPack(lay.pack, c.PackOff, c.EncLen)
	if err != nil {
		return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, err)
	}
	defer bufpool.Put(enc)
	var ref []byte
	if c.Delta {
		if lay.ref == 0 {
			return nil, fmt.Errorf("version %d chunk at %d: delta without a reference: %w", id, off, errCorruptManifest)
		}
		if ref, err = s.chunkPlain(lay.ref, c.RefOffset); err != nil {
			return nil, err
		}
	}
	plain, err := encode.Decode(make([]byte, 0, c.Length), enc, ref)
	if err != nil {
		if errors.Is(err, encode.ErrChecksum) || errors.Is(err, encode.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrChecksum, err)
		}
		return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, err)
	}
	if int64(len(plain)) != c.Length {
		return nil, fmt.Errorf("version %d chunk at %d: decoded %d bytes, want %d: %w", id, off, len(plain), c.Length, ErrChecksum)
	}
	s.rebuilt.Add(1)
	return plain, nil
}

// maxZeroRebuild bounds the chunk of zeros rebuild makes, far above any
// chunk size, so that a damaged record cannot make it allocate a hole.
const maxZeroRebuild = 256 << 20

// versionLayout is the immutable part of a version that rebuilds need.
type versionLayout struct {
	pack []meta.Extent
	ref  meta.VersionID
}

// chunkRecord finds a chunk and its version's layout, in a pending version
// (not yet committed, but readable by its writer) or in the metadata.
func (s *Store) chunkRecord(id meta.VersionID, off int64) (versionLayout, meta.Chunk, error) {
	s.pendingMu.RLock()
	p := s.pending[id]
	s.pendingMu.RUnlock()
	if p != nil {
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].Offset >= off })
		if i < len(p.chunks) && p.chunks[i].Offset == off {
			return versionLayout{pack: p.v.Pack, ref: p.v.Ref}, p.chunks[i], nil
		}
		return versionLayout{}, meta.Chunk{}, fmt.Errorf("pending version %d has no chunk at %d: %w", id, off, errCorruptManifest)
	}
	var lay versionLayout
	var c *meta.Chunk
	err := s.db.View(func(tx *meta.Tx) error {
		v, err := tx.Version(id)
		if err != nil {
			return err
		}
		lay = versionLayout{pack: v.Pack, ref: v.Ref}
		c, err = tx.ChunkAt(id, off)
		return err
	})
	if err != nil {
		return versionLayout{}, meta.Chunk{}, err
	}
	return lay, *c, nil
}

// registerPending makes a finished, uncommitted version readable (a writer
// that reads back its own file before closing it).
func (s *Store) registerPending(p *pendingVersion) {
	s.pendingMu.Lock()
	s.pending[p.v.ID] = p
	s.pendingMu.Unlock()
}

func (s *Store) unregisterPending(p *pendingVersion) {
	s.pendingMu.Lock()
	delete(s.pending, p.v.ID)
	s.pendingMu.Unlock()
}

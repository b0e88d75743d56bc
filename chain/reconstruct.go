package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// ErrChecksum reports bytes that do not match the checksum recorded when
// they were written: the device content is damaged.
var ErrChecksum = errors.New("checksum mismatch")

// chunkPlain returns the plain bytes of the chunk of version id at file
// offset off, from the cache or rebuilt.
func (s *Store) chunkPlain(id meta.VersionID, off int64) ([]byte, error) {
	return s.cachedRebuild(plaincache.Key{V: id, Off: off}, func() ([]byte, error) { return s.rebuild(id, off, false) })
}

// cachedRebuild returns the cache's chunk for k, rebuilding it if need be.
// A rebuild that a swap changing a version's bytes (a tier) overtook may
// have read the records from before it, after the swap dropped the
// version's chunks from the cache: it is not kept, and runs again.
func (s *Store) cachedRebuild(k plaincache.Key, rebuild func() ([]byte, error)) ([]byte, error) {
	for {
		seen := s.rewrites.Load()
		b, err := s.cache.Get(k, func() ([]byte, error) {
			b, err := rebuild()
			if err == nil && s.rewrites.Load() != seen {
				return nil, errRewritten
			}
			return b, err
		})
		if !errors.Is(err, errRewritten) {
			return b, err
		}
	}
}

// errRewritten is a rebuild overtaken by a tier's swap (cachedRebuild).
var errRewritten = errors.New("rewritten while rebuilt")

// referencePlain returns the plain bytes of the chunk of version id at off
// for an encode job whose reference is not in the tier, and whether they
// are the caller's, to give back to bufpool. A chunk in the read cache is
// shared; one rebuilt here is not cached: a save wants each reference
// chunk once, and through the read cache it would evict the chunks readers
// wait for, then be garbage (24 saves of 100 MB against references the
// tier could not hold allocated 5.8 GB that way, and the collections took
// a third of the daemon's CPU).
func (s *Store) referencePlain(id meta.VersionID, off int64) ([]byte, bool, error) {
	if b, ok := s.cache.Lookup(plaincache.Key{V: id, Off: off}); ok {
		return b, false, nil
	}
	b, err := s.rebuild(id, off, true)
	return b, err == nil, err
}

// rebuild decodes one chunk: its encoded bytes from the device, plus, for a
// delta, the reference chunk's plain bytes, rebuilt the same way down to a
// baseline. The chain is walked first and decoded bottom up in recycled
// buffers: only the chunk asked for reaches the cache, so a read of a
// version at depth d does not fill the cache with d chunks nobody will ask
// for again, evicting the chunks read-ahead rebuilt for the reader. With
// pooled the chunk asked for is in a recycled buffer too, the caller's to
// give back.
func (s *Store) rebuild(id meta.VersionID, off int64, pooled bool) ([]byte, error) {
	links, err := s.chainOf(id, off)
	if err != nil {
		return nil, err
	}
	return s.rebuildLinks(links, pooled)
}

// rebuildLinks is rebuild of the chain links, top first.
func (s *Store) rebuildLinks(links []link, pooled bool) ([]byte, error) {
	if plain, ok, err := s.rebuildSplitForm(links, pooled); ok || err != nil {
		return plain, err
	}
	var ref []byte
	for i := len(links) - 1; i >= 0; i-- {
		recycled := i > 0 || pooled
		var dst []byte
		if recycled {
			dst = bufpool.Get(int(links[i].c.Length))[:0]
		} else {
			dst = make([]byte, 0, links[i].c.Length) // cached, shared: never recycled
		}
		plain, err := s.decodeLink(links[i], ref, dst, i == 0)
		if ref != nil {
			bufpool.Put(ref)
		}
		if err != nil {
			if recycled {
				bufpool.Put(dst)
			}
			return nil, err
		}
		ref = plain
	}
	return ref, nil
}

// link is one chunk of a delta chain.
type link struct {
	id  meta.VersionID
	off int64
	lay versionLayout
	c   meta.Chunk
	// sparse reads the chunk by its own pages where the backend fetches
	// by the byte (readLink), without the blocks around it.
	sparse bool
}

// readLink reads l's chunk encoding whole.
func (s *Store) readLink(l link) ([]byte, error) {
	sp, ok := s.data.(storage.SparseReader)
	if !l.sparse || !ok {
		return s.readPack(l.lay.pack, l.c.PackOff, l.c.EncLen)
	}
	buf := bufpool.Get(int(l.c.EncLen))
	if err := sp.ReadAtSparse(l.lay.pack, buf, l.c.PackOff); err != nil {
		bufpool.Put(buf)
		return nil, err
	}
	return buf, nil
}

// maxChain bounds the chain a rebuild walks, so that damaged records that
// form a cycle end in an error, not a hang. Policies keep chains far
// shorter (policy.Policy.MaxDepth, snap_dis).
const maxChain = 1 << 12

// chainOf returns the chunk at off of version id, then its reference chunk,
// and so on down to a baseline or a chunk of zeros.
func (s *Store) chainOf(id meta.VersionID, off int64) ([]link, error) {
	var links []link
	for {
		lay, c, err := s.chunkRecord(id, off)
		if err != nil {
			return nil, err
		}
		links = append(links, link{id: id, off: off, lay: lay, c: c})
		if c.Zeros() || !c.Delta {
			return links, nil
		}
		if lay.ref == 0 {
			return nil, fmt.Errorf("version %d chunk at %d: delta without a reference: %w", id, off, errCorruptManifest)
		}
		if len(links) >= maxChain {
			return nil, fmt.Errorf("version %d chunk at %d: chain deeper than %d: %w", id, off, maxChain, errCorruptManifest)
		}
		id, off = lay.ref, c.RefOffset
	}
}

// decodeLink decodes one chunk of a chain into dst, against ref, the plain
// bytes of its reference chunk (nil for a baseline). Only the chunk asked
// for (verify) is checked against its checksum: a reference below it that
// decoded wrong makes it wrong, and its check fails then, so a read at
// depth d computes one checksum instead of d+1. Unchecked bytes never
// reach the cache.
func (s *Store) decodeLink(l link, ref, dst []byte, verify bool) ([]byte, error) {
	id, off, c := l.id, l.off, l.c
	if c.Zeros() {
		// A chunk of zeros is rebuilt only as a reference, and so has
		// the size of a tensor chunk; a hole's chunk never is one.
		if c.Delta || c.Length > maxZeroRebuild {
			return nil, fmt.Errorf("version %d chunk at %d: %d bytes of zeros as a reference: %w", id, off, c.Length, errCorruptManifest)
		}
		dst = dst[:c.Length]
		clear(dst)
		return dst, nil
	}
	enc, err := s.readLink(l)
	if err != nil {
		return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, err)
	}
	defer bufpool.Put(enc)
	decode := encode.Decode
	if !verify {
		decode = encode.DecodeUnverified
	}
	plain, err := decode(dst, enc, ref)
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
	pack  []meta.Extent
	ref   meta.VersionID
	codec string // the tensor codec its chunks were coded with
}

// chunkRecord finds a chunk and its version's layout in the metadata.
func (s *Store) chunkRecord(id meta.VersionID, off int64) (versionLayout, meta.Chunk, error) {
	var lay versionLayout
	var c *meta.Chunk
	err := s.db.View(func(tx *meta.Tx) error {
		v, err := tx.Version(id)
		if err != nil {
			return err
		}
		lay = versionLayout{pack: v.Pack, ref: v.Ref, codec: v.Codec}
		c, err = tx.ChunkAt(id, off)
		return err
	})
	if err != nil {
		return versionLayout{}, meta.Chunk{}, err
	}
	return lay, *c, nil
}

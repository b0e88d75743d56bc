package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// The view at bfloat16 precision (issue 51; docs/ARCHIVE.md): a version
// read with the low 16 bits of every float32 element of its float32
// chunks zeroed, which is bfloat16 rounded toward zero, kept as float32 in
// the same file format. Chunks of other dtypes read exact. Where the chunk
// and every chunk of its chain below are split16 (a store saved or
// repacked with --codec split16), the view decodes their high planes only;
// elsewhere it rebuilds the exact bytes and cuts them, so a view of any
// store reads the same bytes, only slower.

// OpenView opens a committed version for reading at bfloat16 precision. It
// reads like OpenVersion's Reader, read-ahead included, but its bytes are
// not the file's: the whole-file checksum is not checked, and the
// reference tier's exact chunks are not used.
func (s *Store) OpenView(id meta.VersionID) (*Reader, error) {
	r, err := s.OpenVersion(id)
	if err != nil {
		return nil, err
	}
	r.view = true
	return r, nil
}

// chunkOf returns the chunk of the reader's version at off, exact or in
// its view.
func (r *Reader) chunkOf(off int64) ([]byte, error) {
	if r.view {
		return r.s.cachedRebuild(plaincache.Key{V: r.id, Off: off, View: true}, func() ([]byte, error) { return r.s.rebuildView(r.id, off) })
	}
	return r.s.chunkPlain(r.id, off)
}

// rebuildView rebuilds one chunk's view: from the high planes of its chain
// where all of it is split16, else from its exact bytes.
func (s *Store) rebuildView(id meta.VersionID, off int64) ([]byte, error) {
	links, err := s.chainOf(id, off)
	if err != nil {
		return nil, err
	}
	var encs [][]byte
	defer func() {
		for _, e := range encs {
			bufpool.Put(e)
		}
	}()
	viewable := true
	for _, l := range links {
		if l.c.Zeros() {
			break // a baseline of zeros, at the bottom
		}
		enc, err := s.readPack(l.lay.pack, l.c.PackOff, l.c.EncLen)
		if err != nil {
			return nil, fmt.Errorf("version %d chunk at %d: %w", l.id, l.off, err)
		}
		encs = append(encs, enc)
		if !encode.HighViewable(enc) {
			viewable = false
			break
		}
	}
	if !viewable {
		return s.rebuildCut(id, off, encs[0])
	}
	var high []byte
	if len(encs) < len(links) {
		bottom := links[len(encs)].c
		if bottom.Delta || bottom.Length > maxZeroRebuild {
			return nil, fmt.Errorf("version %d chunk at %d: %d bytes of zeros as a reference: %w", id, off, bottom.Length, errCorruptManifest)
		}
		high = bufpool.Get(encode.HighLen(int(bottom.Length)))
		clear(high)
	}
	for i := len(encs) - 1; i >= 0; i-- {
		l := links[i]
		hl := encode.HighLen(int(l.c.Length))
		next, err := encode.DecodeHigh16(bufpool.Get(hl)[:0], encs[i], high, i == 0)
		if high != nil {
			bufpool.Put(high)
		}
		if err == nil && len(next) != hl {
			err = fmt.Errorf("%w: high form of %d bytes, want %d", encode.ErrCorrupt, len(next), hl)
		}
		if err != nil {
			bufpool.Put(next)
			if errors.Is(err, encode.ErrChecksum) || errors.Is(err, encode.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", ErrChecksum, err)
			}
			return nil, fmt.Errorf("version %d chunk at %d, view: %w", l.id, l.off, err)
		}
		high = next
		s.rebuilt.Add(1)
	}
	s.viewsFromHigh.Add(1)
	out := make([]byte, links[0].c.Length) // cached, shared: never recycled
	encode.WidenHigh(out, high)
	bufpool.Put(high)
	return out, nil
}

// rebuildCut is the view of a chunk whose chain is not all split16: its
// exact bytes (checked), cut when the chunk is float32 (top is its encoding).
func (s *Store) rebuildCut(id meta.VersionID, off int64, top []byte) ([]byte, error) {
	h, err := encode.Inspect(top)
	if err != nil {
		return nil, fmt.Errorf("version %d chunk at %d: %w: %w", id, off, ErrChecksum, err)
	}
	plain, err := s.rebuild(id, off, false)
	if err != nil {
		return nil, err
	}
	if h.DType == encode.Float32 {
		encode.TruncateFloat32(plain)
	}
	return plain, nil
}

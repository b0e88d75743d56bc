package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/encode"
)

// rebuildSplitForm rebuilds a chunk whose chain is all split16 float32
// chunks (a store saved or repacked with --codec split16): each level below
// the top decodes into its split form (high halves, then low halves), the
// next level's reference as it is, and only the top is joined into plain
// bytes and checked. Decoding each level as plain bytes would cut every
// reference into halves again and join it back: twice the passes over
// memory of the entropy decode's own. ok is false, with nothing decoded,
// for any other chain (the caller rebuilds it as any).
func (s *Store) rebuildSplitForm(links []link, pooled bool) (plain []byte, ok bool, err error) {
	for _, l := range links {
		if !l.c.Zeros() && l.lay.codec != split16Name {
			return nil, false, nil
		}
	}
	var encs [][]byte
	defer func() {
		for _, e := range encs {
			bufpool.Put(e)
		}
	}()
	for _, l := range links {
		if l.c.Zeros() {
			break // a baseline of zeros, at the bottom
		}
		enc, err := s.readLink(l)
		if err != nil {
			return nil, true, fmt.Errorf("version %d chunk at %d: %w", l.id, l.off, err)
		}
		encs = append(encs, enc)
		if !encode.HighViewable(enc) {
			return nil, false, nil // raw bytes, another dtype: not in halves
		}
	}
	var form []byte
	if len(encs) < len(links) {
		bottom := links[len(encs)].c
		if bottom.Delta || bottom.Length > maxZeroRebuild {
			return nil, true, fmt.Errorf("version %d chunk at %d: %d bytes of zeros as a reference: %w", links[0].id, links[0].off, bottom.Length, errCorruptManifest)
		}
		form = bufpool.Get(int(bottom.Length))
		clear(form)
	}
	for i := len(encs) - 1; i >= 0; i-- {
		l, top := links[i], i == 0
		var dst []byte
		if !top || pooled {
			dst = bufpool.Get(int(l.c.Length))[:0]
		} else {
			dst = make([]byte, 0, l.c.Length) // cached, shared: never recycled
		}
		next, err := encode.DecodeForm16(dst, encs[i], form, !top)
		if form != nil {
			bufpool.Put(form)
		}
		if err == nil && int64(len(next)) != l.c.Length {
			err = fmt.Errorf("%w: decoded %d bytes, want %d", encode.ErrCorrupt, len(next), l.c.Length)
		}
		if err != nil {
			if !top || pooled {
				bufpool.Put(dst)
			}
			if errors.Is(err, encode.ErrChecksum) || errors.Is(err, encode.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", ErrChecksum, err)
			}
			return nil, true, fmt.Errorf("version %d chunk at %d: %w", l.id, l.off, err)
		}
		form = next
		s.rebuilt.Add(1)
	}
	s.splitForms.Add(1)
	return form, true, nil
}

// split16Name is the codec name versions of split16 record.
var split16Name = encode.Split16.String()

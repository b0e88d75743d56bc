package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// packWriter appends encoded chunks of one version into a byte stream (the
// pack) and hands it to the backend in block-aligned pieces as it fills, so
// memory stays bounded whatever the file size. The backend's space is only
// reserved until the version's commit.
type packWriter struct {
	s       *Store
	buf     []byte // bytes not yet written, always < flushAt once Append returns
	flushAt int
	off     int64 // pack bytes appended so far
	loc     storage.Location
}

func newPackWriter(s *Store) *packWriter {
	const flushBlocks = 256 // 1 MiB of 4 KiB pages per backend write
	bs := s.blockSize
	return &packWriter{s: s, flushAt: flushBlocks * bs, buf: make([]byte, 0, flushBlocks*bs+bs)}
}

// Append adds an encoded chunk and returns its offset in the pack.
func (p *packWriter) Append(enc []byte) (int64, error) {
	at := p.off
	for len(enc) > 0 {
		n := copy(p.buf[len(p.buf):p.flushAt], enc)
		if n == 0 {
			break
		}
		p.buf = p.buf[:len(p.buf)+n]
		enc = enc[n:]
		p.off += int64(n)
		if len(p.buf) == p.flushAt {
			if err := p.flush(); err != nil {
				return 0, err
			}
		}
	}
	return at, nil
}

// flush writes whole blocks of buf, padding the last block with zeros.
func (p *packWriter) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	bs := p.s.blockSize
	for len(p.buf)%bs != 0 {
		p.buf = append(p.buf, 0)
	}
	loc, err := p.s.data.Write(p.buf)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	p.loc = meta.AppendExtents(p.loc, loc)
	p.buf = p.buf[:0]
	return nil
}

// Finish writes what is buffered and returns the pack's location and size.
func (p *packWriter) Finish() (storage.Location, int64, error) {
	if err := p.flush(); err != nil {
		return nil, 0, err
	}
	return p.loc, p.off, nil
}

// Abort gives back the backend space written so far.
func (p *packWriter) Abort() {
	p.s.data.Release(p.loc)
	p.loc = nil
	p.buf = p.buf[:0]
}

// readPack reads n bytes at offset off of the pack kept at loc. The bytes
// live in a pooled buffer: the caller gives it back with bufpool.Put.
func (s *Store) readPack(loc storage.Location, off, n int64) ([]byte, error) {
	buf := bufpool.Get(int(n))
	if err := s.data.ReadAt(loc, buf, off); err != nil {
		bufpool.Put(buf)
		if errors.Is(err, storage.ErrShortLocation) {
			err = fmt.Errorf("%w: %w", err, errCorruptManifest)
		}
		return nil, err
	}
	return buf, nil
}

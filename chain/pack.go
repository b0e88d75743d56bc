package chain

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// packWriter appends encoded chunks of one version into a byte stream (the
// pack) and hands it to the backend in block-aligned pieces as it fills, so
// memory stays bounded whatever the file size. The backend's space is only
// reserved until the version's commit.
//
// The backend writes run on a goroutine of their own, one at a time and in
// order, while the ingest reads, labels and chunks the next bytes: on a
// machine with many cores those two, not the encoders, bound a commit. Two
// buffers take turns.
type packWriter struct {
	s       *Store
	buf     []byte // bytes not yet handed over, always < flushAt once Append returns
	flushAt int
	off     int64 // pack bytes appended so far

	writes chan []byte   // to the writing goroutine; nil until the first flush
	free   chan []byte   // buffers it has written
	done   chan struct{} // closed when it has written everything sent
	failed atomic.Bool   // err is set
	err    error
	loc    storage.Location // the extents written, in pack order

	// measureOnly counts the bytes appended and writes nothing: what a
	// coding would store, measured without wearing the device.
	measureOnly bool
}

// packFlushBlocks is the backend blocks per write: 1 MiB of 4 KiB pages.
const packFlushBlocks = 256

func newPackWriter(s *Store) *packWriter {
	return &packWriter{s: s, flushAt: packFlushBlocks * s.blockSize}
}

// Append adds an encoded chunk and returns its offset in the pack.
func (p *packWriter) Append(enc []byte) (int64, error) {
	at := p.off
	if p.measureOnly {
		p.off += int64(len(enc))
		return at, nil
	}
	if p.buf == nil && len(enc) > 0 {
		// From the pool, when first needed: a small file's commit (most
		// of a checkpoint's files) then allocates and clears no 1 MiB.
		p.buf = bufpool.Get(p.flushAt)[:0]
	}
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

// flush hands whole blocks of buf to the writing goroutine, padding the
// last block with zeros, and takes the other buffer. It returns the error of
// an earlier write, if one failed.
func (p *packWriter) flush() error {
	if p.failed.Load() {
		p.wait()
		return p.err
	}
	if len(p.buf) == 0 {
		return nil
	}
	bs := p.s.blockSize
	for len(p.buf)%bs != 0 {
		p.buf = append(p.buf, 0)
	}
	if p.writes == nil {
		p.writes, p.free, p.done = make(chan []byte), make(chan []byte, 2), make(chan struct{})
		go p.write()
	}
	p.writes <- p.buf // taken once the write before it is done
	select {
	case b := <-p.free:
		p.buf = b[:0]
	default: // the first flush: the second buffer
		p.buf = bufpool.Get(p.flushAt)[:0]
	}
	return nil
}

// write writes the buffers flush sends, in order, until wait.
func (p *packWriter) write() {
	defer close(p.done)
	for b := range p.writes {
		if !p.failed.Load() {
			loc, err := p.s.data.Write(b)
			if err != nil {
				p.err = fmt.Errorf("pack: %w", err)
				p.failed.Store(true)
			} else {
				p.loc = meta.AppendExtents(p.loc, loc)
			}
		}
		p.free <- b
	}
}

// wait returns once everything flushed is written (or failed).
func (p *packWriter) wait() {
	if p.writes != nil {
		close(p.writes)
		<-p.done
		p.writes = nil
	}
}

// dropBuffers waits for the writes and gives the buffers back to the pool.
func (p *packWriter) dropBuffers() {
	p.wait()
	for p.free != nil {
		select {
		case b := <-p.free:
			bufpool.Put(b)
		default:
			p.free = nil
		}
	}
	if p.buf != nil {
		bufpool.Put(p.buf)
		p.buf = nil
	}
}

// Finish writes what is buffered and returns the pack's location and size.
func (p *packWriter) Finish() (storage.Location, int64, error) {
	err := p.flush()
	p.dropBuffers()
	if err == nil {
		err = p.err
	}
	if err != nil {
		return nil, 0, err
	}
	return p.loc, p.off, nil
}

// Abort gives back the backend space written so far.
func (p *packWriter) Abort() {
	p.dropBuffers()
	p.s.data.Release(p.loc)
	p.loc = nil
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

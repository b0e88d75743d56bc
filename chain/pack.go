package chain

import (
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/meta"
)

// packWriter appends encoded chunks of one version into a byte stream (the
// pack) and writes it to the device in page-aligned pieces as it fills, so
// memory stays bounded whatever the file size. Pages come from the
// allocator as reservations; the version's commit makes them permanent.
type packWriter struct {
	s       *Store
	buf     []byte // bytes not yet written, always < flushAt once Append returns
	flushAt int
	off     int64 // pack bytes appended so far
	extents []meta.Extent
	written int64 // pages written so far
}

func newPackWriter(s *Store) *packWriter {
	const flushPages = 256 // 1 MiB of 4 KiB pages per device write
	ps := s.pageSize
	return &packWriter{s: s, flushAt: flushPages * ps, buf: make([]byte, 0, flushPages*ps+ps)}
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

// flush writes whole pages of buf, padding the last page with zeros.
func (p *packWriter) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	ps := p.s.pageSize
	pages := (len(p.buf) + ps - 1) / ps
	for len(p.buf) < pages*ps {
		p.buf = append(p.buf, 0)
	}
	exts, err := p.s.alloc.Reserve(int64(pages))
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	p.extents = appendExtents(p.extents, exts)
	data := p.buf
	for _, e := range exts {
		n := int(e.Len) * ps
		if err := p.s.dev.WritePages(e.Start, data[:n]); err != nil {
			return fmt.Errorf("pack: write %d pages at %d: %w", e.Len, e.Start, err)
		}
		data = data[n:]
	}
	p.written += int64(pages)
	p.buf = p.buf[:0]
	return nil
}

// Finish writes what is buffered and returns the pack's extents and size.
func (p *packWriter) Finish() ([]meta.Extent, int64, error) {
	if err := p.flush(); err != nil {
		return nil, 0, err
	}
	return p.extents, p.off, nil
}

// Abort gives back every page: trimmed on the device so that the simulator's
// valid pages stay those of committed data, then unreserved.
func (p *packWriter) Abort() {
	for _, e := range p.extents {
		_ = p.s.dev.Trim(e.Start, e.Len)
	}
	p.s.alloc.Unreserve(p.extents)
	p.extents = nil
	p.buf = p.buf[:0]
}

// appendExtents appends exts, merging with the last extent when contiguous.
func appendExtents(dst, exts []meta.Extent) []meta.Extent {
	for _, e := range exts {
		if n := len(dst); n > 0 && dst[n-1].End() == e.Start {
			dst[n-1].Len += e.Len
			continue
		}
		dst = append(dst, e)
	}
	return dst
}

// readPack reads n bytes at offset off of the pack laid out on extents. The
// bytes live in a pooled buffer: the caller gives it back with bufpool.Put(full).
func (s *Store) readPack(extents []meta.Extent, off, n int64) (data, full []byte, err error) {
	ps := int64(s.pageSize)
	first := off / ps
	pages := (off%ps + n + ps - 1) / ps
	buf := bufpool.Get(int(pages * ps))
	var pageBase int64 // pack page index of the current extent's first page
	got := int64(0)    // pages read into buf
	for _, e := range extents {
		if got == pages {
			break
		}
		want := first + got // next pack page needed
		if want >= pageBase+e.Len {
			pageBase += e.Len
			continue
		}
		start := want - pageBase
		k := min(e.Len-start, pages-got)
		if err := s.dev.ReadPages(e.Start+start, buf[got*ps:(got+k)*ps]); err != nil {
			bufpool.Put(buf)
			return nil, nil, fmt.Errorf("read %d pages at %d: %w", k, e.Start+start, err)
		}
		got += k
		pageBase += e.Len
	}
	if got < pages {
		bufpool.Put(buf)
		return nil, nil, fmt.Errorf("pack ends %d pages before the chunk does: %w", pages-got, errCorruptManifest)
	}
	return buf[off%ps : off%ps+n], buf, nil
}

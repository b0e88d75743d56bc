package chain

import (
	"fmt"
	"sync"
)

// reservations keeps the backend blocks that accepted, uncommitted writes
// will need, so that a write fails with ENOSPC when the space to hold it is
// not there, as on a plain filesystem, instead of succeeding and losing its
// bytes at the commit.
type reservations struct {
	mu     sync.Mutex
	blocks int64
}

// reserve moves *held to want blocks. Growing fails with ErrNoSpace when
// the backend's free blocks, less what others hold, cannot cover it;
// shrinking always succeeds.
func (s *Store) reserve(held *int64, want int64) error {
	r := &s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	if grow := want - *held; grow > 0 {
		_, free := s.data.Space()
		if r.blocks+grow > free {
			return fmt.Errorf("reserve %d blocks for a write (%d free, %d held by other writes): %w",
				grow, free, r.blocks, ErrNoSpace)
		}
	}
	r.blocks += want - *held
	*held = want
	return nil
}

// unflushedBound is the most plain bytes an ingest holds that have not yet
// reached the backend: the chunks in flight and the pack's buffer.
func (s *Store) unflushedBound() int64 {
	return int64(maxInFlight+1)*int64(max(s.layout.ChunkBytes(true, 8), s.layout.RawChunk)) + 1<<20
}

func (w *Writer) blocksFor(bytes int64) int64 {
	bs := int64(w.s.blockSize)
	if bytes <= 0 {
		return 0
	}
	return (bytes+bs-1)/bs + 1 // and a block for the pack's padding
}

// reserveFor claims the space that n more bytes of data may need before
// they are accepted: what the ingest holds and has not flushed, which is
// bounded (what it flushed is on the backend already). Holes are zeros,
// which cost next to nothing, and are not counted (a sparse 64 GiB file
// needs no 64 GiB). Call with w.mu held.
func (w *Writer) reserveFor(n int) error {
	return w.s.reserve(&w.resv, w.blocksFor(min(w.written+int64(n), w.s.unflushedBound())))
}

// unreserve gives the claim back (commit or abort). Call with w.mu held.
func (w *Writer) unreserve() {
	_ = w.s.reserve(&w.resv, 0) // shrinking always succeeds
}

package chain

import (
	"fmt"
	"sync"
)

// reservations keeps the backend blocks that accepted, uncommitted writes
// will need, so that a write fails with ENOSPC when the space to hold it is
// not there, as on a plain filesystem, instead of succeeding and losing its
// bytes at close (which shells and many programs never check).
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

// forceReserve moves *held to want blocks whatever is free: a write already
// accepted keeps its claim.
func (s *Store) forceReserve(held *int64, want int64) {
	r := &s.resv
	r.mu.Lock()
	r.blocks += want - *held
	*held = want
	r.mu.Unlock()
}

// unflushedBound is the most plain bytes an ingest holds that have not yet
// reached the backend: the chunks in flight and the pack's buffer.
func (s *Store) unflushedBound() int64 {
	return int64(maxInFlight+1)*int64(max(s.layout.ChunkBytes(true, 8), s.layout.RawChunk)) + 1<<20
}

// pendingBytes is what the writer's accepted bytes may still need of the
// backend: the window, the write-back queue, the bytes the ingest has not
// flushed (bounded), or a
// draft's pages in memory (staged pages are on the backend already). Bytes
// a truncate declared and nothing wrote are zeros, which cost next to
// nothing, and are not counted (a sparse 64 GiB file needs no 64 GiB).
// A draft's re-ingest at commit is not counted either: it may still fail
// with ENOSPC at close, keeping the previous content.
func (w *Writer) pendingBytes() int64 {
	if w.ingest != nil {
		return w.windowBytes + w.queued + min(w.front-w.queued, w.s.unflushedBound())
	}
	return int64(len(w.draft.mem)) * w.draft.ps
}

func (w *Writer) blocksFor(bytes int64) int64 {
	bs := int64(w.s.blockSize)
	if bytes <= 0 {
		return 0
	}
	return (bytes+bs-1)/bs + 1 // and a block for the pack's padding
}

// reserveFor claims the space of n more bytes before they are accepted.
func (w *Writer) reserveFor(n int) error {
	return w.s.reserve(&w.resv, w.blocksFor(w.pendingBytes()+int64(n)))
}

// settle fits the claim to what the writer holds now.
func (w *Writer) settle() {
	w.s.forceReserve(&w.resv, w.blocksFor(w.pendingBytes()))
}

// unreserve gives the claim back (commit or abort).
func (w *Writer) unreserve() {
	w.s.forceReserve(&w.resv, 0)
}

// DefaultDirtyBytes is the memory all writers together keep for bytes not
// yet streamed: enough for several out-of-order saves at once, bounded
// however many files are open (each writer alone keeps at most 64 MiB).
const DefaultDirtyBytes = 256 << 20

// dirtyMemory counts the bytes held by windows and drafts' pages, for the
// whole store.
type dirtyMemory struct {
	mu    sync.Mutex
	held  int64
	limit int64
}

// take claims n bytes if they fit under the limit.
func (m *dirtyMemory) take(n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held+n > m.limit {
		return false
	}
	m.held += n
	return true
}

// add claims (or, negative, gives back) n bytes whatever the limit.
func (m *dirtyMemory) add(n int64) {
	m.mu.Lock()
	m.held += n
	m.mu.Unlock()
}

// over reports whether the holders are past the limit.
func (m *dirtyMemory) over() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held > m.limit
}

// DirtyBytes is the memory held now by uncommitted bytes.
func (s *Store) DirtyBytes() int64 {
	s.dirty.mu.Lock()
	defer s.dirty.mu.Unlock()
	return s.dirty.held
}

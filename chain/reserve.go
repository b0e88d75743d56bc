package chain

import (
	"fmt"
	"sync"
)

// reservations keeps the backend blocks that accepted, uncommitted writes
// will need, so that a write fails with ENOSPC when the space to hold it is
// not there, as on a plain filesystem, instead of succeeding and losing its
// bytes at the commit.
//
// It also keeps the blocks fallocate(2) reserved for files being written
// (ReserveSpace), which a plain filesystem allocates at once. They are held
// against every other write; the file's own writer draws on them for the
// bytes it accepts, and what its commit did not use goes back when the
// commit ends (landed, failed or dropped) or the file is deleted.
type reservations struct {
	mu     sync.Mutex
	blocks int64 // all held: writers' and files'
	// files holds fallocate's blocks by file (part of blocks); filesSum
	// is their sum.
	files    map[Ino]int64
	filesSum int64
}

// reserve moves *held to want blocks. Growing fails with ErrNoSpace when
// the backend's free blocks, less what others hold, cannot cover it;
// shrinking always succeeds.
func (s *Store) reserve(held *int64, want int64) error {
	s.resv.mu.Lock()
	defer s.resv.mu.Unlock()
	return s.reserveLocked(held, want, 0)
}

// reserveLocked is reserve, where drawn of the growth is paid by blocks
// held already (the file's fallocated ones, which the caller then gives
// up). Call with s.resv.mu held.
func (s *Store) reserveLocked(held *int64, want, drawn int64) error {
	r := &s.resv
	if grow := want - *held - drawn; grow > 0 {
		_, free := s.data.Space()
		if r.blocks+grow > free {
			return fmt.Errorf("reserve %d blocks for a write (%d free, %d held by other writes): %w",
				grow, free, r.blocks, ErrNoSpace)
		}
	}
	r.blocks += want - *held - drawn
	*held = want
	return nil
}

// unflushedBound is the most plain bytes an ingest holds that have not yet
// reached the backend: the chunks in flight and the pack's two buffers
// (one filling, one being written).
func (s *Store) unflushedBound() int64 {
	return int64(maxInFlight+1)*int64(max(s.layout.ChunkBytes(true, 8), s.layout.RawChunk)) +
		2*packFlushBlocks*int64(s.blockSize)
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
// needs no 64 GiB). The file's fallocated blocks pay for its bytes as they
// come: a block of them for each block of bytes. Other files' fallocated
// blocks are checked at every write, not only when the claim grows: the
// claim stops growing at the bound while the bytes flushed beyond it take
// free blocks. Call with w.mu held.
func (w *Writer) reserveFor(n int) error {
	s, r := w.s, &w.s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := int64(s.blockSize)
	want := w.blocksFor(min(w.written+int64(n), s.unflushedBound()))
	if others := r.filesSum - r.files[w.ino]; others > 0 {
		if _, free := s.data.Space(); want+others > free {
			return fmt.Errorf("write: %d blocks free, %d of them fallocated for other files: %w", free, others, ErrNoSpace)
		}
	}
	drawn := min(r.files[w.ino], (w.written+int64(n))/bs-w.written/bs)
	if err := s.reserveLocked(&w.resv, want, drawn); err != nil {
		return err
	}
	r.setFile(w.ino, r.files[w.ino]-drawn)
	return nil
}

// unreserve gives the claim back (commit or abort), and what is left of
// the file's fallocated blocks: their reservation ends with the commit.
// Call with w.mu held.
func (w *Writer) unreserve() {
	r := &w.s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = w.s.reserveLocked(&w.resv, 0, 0) // shrinking always succeeds
	r.blocks -= r.files[w.ino]
	r.setFile(w.ino, 0)
}

// setFile records that ino holds blocks fallocated blocks, and keeps their
// sum; it leaves r.blocks to the caller. Call with r.mu held.
func (r *reservations) setFile(ino Ino, blocks int64) {
	r.filesSum += blocks - r.files[ino]
	if blocks > 0 {
		if r.files == nil {
			r.files = map[Ino]int64{}
		}
		r.files[ino] = blocks
	} else {
		delete(r.files, ino)
	}
}

// ReserveSpace holds bytes more of the backend (rounded up to whole
// blocks) for file ino, which fallocate(2) allocated in its staging file,
// until its next commit ends or it is deleted (see reservations). It fails
// with ErrNoSpace, holding nothing more, when the free blocks less what is
// held cannot cover them.
func (s *Store) ReserveSpace(ino Ino, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	r := &s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := int64(s.blockSize)
	var held int64
	if err := s.reserveLocked(&held, (bytes+bs-1)/bs, 0); err != nil {
		return fmt.Errorf("fallocate %d bytes: %w", bytes, err)
	}
	r.setFile(ino, r.files[ino]+held)
	return nil
}

// UnreserveSpace gives back bytes (rounded up to whole blocks) of what
// file ino holds, at most all of it: a fallocate that failed, or that
// allocated less than was reserved for it.
func (s *Store) UnreserveSpace(ino Ino, bytes int64) {
	r := &s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := int64(s.blockSize)
	give := min(r.files[ino], (max(bytes, 0)+bs-1)/bs)
	r.blocks -= give
	r.setFile(ino, r.files[ino]-give)
}

// ReservedSpace is what file ino holds of fallocated space, in bytes.
func (s *Store) ReservedSpace(ino Ino) int64 {
	r := &s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[ino] * int64(s.blockSize)
}

// reservedFiles is the blocks held for fallocated files, which statfs
// counts as used.
func (s *Store) reservedFiles() int64 {
	s.resv.mu.Lock()
	defer s.resv.mu.Unlock()
	return s.resv.filesSum
}

// dropReserved ends file ino's reservation: the file is deleted.
func (s *Store) dropReserved(ino Ino) {
	r := &s.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocks -= r.files[ino]
	r.setFile(ino, 0)
}

package chain

import (
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"

	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// windowChunks is how many chunk records a reader loads at a time: its index
// memory stays bounded for files of any size.
const windowChunks = 256

// Reader reads one version. Sequential reads rebuild the chunks ahead of
// the reader in parallel while the current one is served (the paper's two
// buffers, Fig. 11, widened to a window; readahead.go); random reads
// rebuild only the chunks they touch. Readers of one version share rebuilt
// chunks through the store's cache. A read that covers the whole file from
// its start verifies the file checksum. Safe for concurrent use.
type Reader struct {
	s        *Store
	id       meta.VersionID
	size     int64
	checksum uint32

	mu      sync.Mutex
	win     []meta.Chunk
	crc     uint32 // over [0, crcOff) when reads came in order
	crcOff  int64
	lastEnd int64
	ra      readAheadState
	noTier  bool        // SkipTier
	view    Precision   // OpenView: a precision view, not the exact bytes
	patches []bytePatch // a view's corrected zip CRC fields (view.go)
	checked uint64      // Store.freedSeq when the version was last seen to exist
}

// OpenVersion opens a committed version for reading.
func (s *Store) OpenVersion(id meta.VersionID) (*Reader, error) {
	r := &Reader{s: s, id: id}
	if id == 0 {
		return r, nil // empty file
	}
	s.pinMu.Lock()
	s.waitRewrittenLocked(id) // its size and checksum as a tier leaves them
	s.pinMu.Unlock()
	r.checked = s.freedSeq.Load()
	err := s.db.View(func(tx *meta.Tx) error {
		v, err := tx.Version(id)
		if err != nil {
			return err
		}
		r.size, r.checksum = v.Size, v.Checksum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open version %d: %w", id, err)
	}
	return r, nil
}

// SkipTier makes the reader rebuild every chunk from the backend, even
// one whose plain bytes the reference tier holds: a read-back that verifies
// (and times) what the medium keeps, not the memory of the save just made
// (replay's restore).
func (r *Reader) SkipTier() { r.noTier = true }

// Version is the version the reader reads.
func (r *Reader) Version() meta.VersionID { return r.id }

// Size is the version's length in bytes.
func (r *Reader) Size() int64 { return r.size }

// hold pins the reader's version for the length of one read, so that a
// commit that replaces the file's content frees it only after the read:
// otherwise the read would find its chunk records gone or, worse, decode
// pages another save has since been given. It fails with ErrNotFound when
// the version is gone already (the file's content is a newer one).
func (r *Reader) hold() (release func(), err error) {
	if r.id == 0 {
		return func() {}, nil
	}
	freed, ok := r.s.pinForRead(r.id)
	release = func() { r.s.unpin(r.id) }
	if !ok {
		return nil, fmt.Errorf("version %d is being freed: %w", r.id, ErrNotFound)
	}
	r.mu.Lock()
	checked := r.checked
	r.mu.Unlock()
	if freed == checked {
		return release, nil // no version was freed since it was seen
	}
	err = r.s.db.View(func(tx *meta.Tx) error {
		_, err := tx.Version(r.id)
		return err
	})
	if err != nil {
		release()
		return nil, fmt.Errorf("read version %d: %w", r.id, err)
	}
	r.mu.Lock()
	r.checked = max(r.checked, freed)
	r.mu.Unlock()
	return release, nil
}

// ReadAt reads len(p) bytes at off; fewer, with io.EOF, at the end. Once
// its version is freed (a newer commit replaced it), it fails with
// ErrNotFound.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	release, err := r.hold()
	if err != nil {
		return 0, err
	}
	defer release()
	start := off
	n := 0
	r.readAhead(start, min(r.size, off+int64(len(p))))
	for n < len(p) && off < r.size {
		c, err := r.chunkFor(off)
		if err != nil {
			return n, err
		}
		if c.Zeros() {
			k := int(min(int64(len(p)-n), c.End()-off))
			clear(p[n : n+k])
			n += k
			off += int64(k)
			continue
		}
		// The newest version of a family is usually in the reference
		// tier, whole: reading back a checkpoint just saved rebuilds
		// nothing.
		if !r.noTier && r.view == exact {
			if k, ok := r.s.refs.CopyAt(plaincache.Key{V: r.id, Off: c.Offset}, p[n:], off-c.Offset); ok {
				n += k
				off += int64(k)
				continue
			}
		}
		plain, err := r.chunkOf(c.Offset)
		if err != nil {
			logrus.WithError(err).Errorf("read version %d at %d", r.id, off)
			return n, err
		}
		k := copy(p[n:], plain[off-c.Offset:])
		n += k
		off += int64(k)
	}
	for _, pt := range r.patches {
		if lo, hi := max(start, pt.off), min(start+int64(n), pt.off+int64(len(pt.b))); lo < hi {
			copy(p[lo-start:hi-start], pt.b[lo-pt.off:])
		}
	}
	if err := r.account(p[:n], start); err != nil {
		return n, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// account extends the running checksum of in-order reads and checks it
// when the whole file has been read.
func (r *Reader) account(p []byte, off int64) error {
	if r.view != exact {
		return nil // a view's bytes are not the file's
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if off != r.crcOff || len(p) == 0 {
		return nil
	}
	r.crc = crc32.Update(r.crc, castagnoli, p)
	r.crcOff += int64(len(p))
	return r.checkWhole()
}

// checkWhole checks the file checksum once the running one covers the file.
func (r *Reader) checkWhole() error {
	if r.crcOff == r.size && r.crc != r.checksum {
		logrus.Errorf("version %d: file checksum %08x, recorded %08x", r.id, r.crc, r.checksum)
		return fmt.Errorf("version %d: whole-file %w", r.id, ErrChecksum)
	}
	return nil
}

// skipZeros passes over the chunk of zeros holding off, if any, as an
// in-order read of it would (the running checksum), without producing its
// bytes, and returns where it ends (off if the chunk has content): a deep
// check of a 64 GiB sparse file reads none of its hole.
func (r *Reader) skipZeros(off int64) (int64, error) {
	release, err := r.hold()
	if err != nil {
		return off, err
	}
	defer release()
	end, err := r.zerosEnd(off)
	if err != nil || end == off {
		return off, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastEnd = end
	if off != r.crcOff {
		return end, nil
	}
	r.crc = crc32Zeros(r.crc, end-off)
	r.crcOff = end
	return end, r.checkWhole()
}

// zerosEnd returns the end of the chunk of zeros holding off, or off if the
// chunk holding it has content (or off is past the end).
func (r *Reader) zerosEnd(off int64) (int64, error) {
	if off >= r.size {
		return off, nil
	}
	c, err := r.chunkFor(off)
	if err != nil || !c.Zeros() {
		return off, err
	}
	return c.End(), nil
}

// SeekExtent finds, from off, the first byte of data (data) or of a hole (not
// data), as lseek's SEEK_DATA and SEEK_HOLE: a hole is a chunk of zeros
// (a hole nobody wrote, or zeros written), and the end of the file is one.
// It returns the size when there is none.
func (r *Reader) SeekExtent(off int64, data bool) (int64, error) {
	if off >= r.size {
		return r.size, nil
	}
	release, err := r.hold()
	if err != nil {
		return 0, err
	}
	defer release()
	for off < r.size {
		c, err := r.chunkFor(off)
		if err != nil {
			return 0, err
		}
		if c.Zeros() != data {
			return off, nil
		}
		off = c.End()
	}
	return r.size, nil
}

// chunkFor returns the chunk holding file offset off.
func (r *Reader) chunkFor(off int64) (meta.Chunk, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chunkForLocked(off)
}

func (r *Reader) chunkForLocked(off int64) (meta.Chunk, error) {
	if c, ok := findChunk(r.win, off); ok {
		return c, nil
	}
	win, err := r.s.loadChunks(r.win[:0], r.id, off, windowChunks)
	if err != nil {
		return meta.Chunk{}, err
	}
	r.win = win
	if c, ok := findChunk(r.win, off); ok {
		return c, nil
	}
	return meta.Chunk{}, fmt.Errorf("version %d: no chunk covers offset %d: %w", r.id, off, errCorruptManifest)
}

func findChunk(win []meta.Chunk, off int64) (meta.Chunk, bool) {
	i := sort.Search(len(win), func(i int) bool { return win[i].End() > off })
	if i < len(win) && win[i].Offset <= off {
		return win[i], true
	}
	return meta.Chunk{}, false
}

// loadChunks appends up to max chunk records of version id from the one
// holding off.
func (s *Store) loadChunks(dst []meta.Chunk, id meta.VersionID, off int64, max int) ([]meta.Chunk, error) {
	err := s.db.View(func(tx *meta.Tx) error {
		var err error
		dst, err = tx.Chunks(dst, id, off, max)
		return err
	})
	return dst, err
}

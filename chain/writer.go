package chain

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// MaxFileSize is the largest file the store keeps, as on ext4 with 4 KiB
// blocks (16 TiB): past it writes and truncates fail with EFBIG at once
// instead of committing petabytes of zeros.
const MaxFileSize = 1 << 44

// ErrNotSequential is returned by a write below the bytes a Writer has
// already accepted: its content is ingested as it arrives, in order.
var ErrNotSequential = errors.New("write below the bytes already written: a writer takes its file in order")

// Writer ingests the new content of one file sequentially, from offset 0:
// each write starts at or past the end of the bytes accepted before it, and
// the bytes it skips are a hole (zeros, never written, which cost nothing).
// Staged saves (FileCommit.Run) and replay feed the store this way; any
// other write pattern is the staging file's business (fs), not the store's.
// A Writer is used by one goroutine at a time.
type Writer struct {
	s      *Store
	ino    meta.Ino
	target refTarget

	mu      sync.Mutex
	ingest  *ingest     // nil once committed or aborted
	change  wear.Change // what a plain filesystem writes for the save (shadow)
	kept    int64       // the first bytes, the file's content before, unchanged (Appended)
	written int64       // data bytes accepted (holes not counted), for the reservation
	mtime   int64
	resv    int64 // backend blocks reserved for the accepted bytes (reserve.go)
}

// NewWriter starts new content for file ino, empty at first; path tells its
// name at any moment (it names the family when the reference is chosen).
// A file that had content is rewritten in place, and its previous content
// is its reference of choice.
func (s *Store) NewWriter(ino meta.Ino, path func() string) (*Writer, error) {
	n, err := s.Names().Inode(ino)
	if err != nil {
		return nil, err
	}
	w := &Writer{s: s, ino: ino, target: refTarget{path: path, prev: n.Version},
		change: wear.Change{Truncated: true}}
	w.ingest = s.newIngest(w.target)
	w.ingest.owner = w
	return w, nil
}

// Size is the size of the content accepted so far, holes included.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ingest == nil {
		return 0
	}
	return w.ingest.Size()
}

// WriteAt writes p at off, which must not be below Size: the bytes from
// Size to off are a hole. A write below Size fails with ErrNotSequential
// and changes nothing. mtime is the modification time the commit records
// (0: the commit's).
func (w *Writer) WriteAt(p []byte, off int64, mtime int64) (int, error) {
	if off < 0 || off+int64(len(p)) > MaxFileSize {
		return 0, fmt.Errorf("write of %d bytes at %d: %w", len(p), off, syscall.EFBIG)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	in, err := w.open()
	if err != nil {
		return 0, err
	}
	if err := w.accept(in, off, len(p), mtime); err != nil || len(p) == 0 {
		return 0, err
	}
	if err := w.take(in, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// accept checks that up to n bytes may be written at off, reserves the
// device space for them and makes the hole before off. Call with w.mu
// held.
func (w *Writer) accept(in *ingest, off int64, n int, mtime int64) error {
	if off < in.Size() {
		return w.notSequential(in, off, n)
	}
	w.mtime = mtime
	if n == 0 {
		return nil
	}
	if err := w.reserveFor(n); err != nil {
		return err
	}
	if off > in.Size() {
		return in.Hole(off - in.Size())
	}
	return nil
}

func (w *Writer) notSequential(in *ingest, off int64, n int) error {
	return fmt.Errorf("write of %d bytes at %d to %s, %d bytes already written: %w",
		n, off, w.target.pathNow(), in.Size(), ErrNotSequential)
}

// take ingests p, the bytes at off (accept came first). Call with w.mu
// held.
func (w *Writer) take(in *ingest, p []byte, off int64) error {
	if err := in.Write(p); err != nil {
		return err
	}
	w.written += int64(len(p))
	w.s.noteDirty(&w.change, max(off, w.kept), off+int64(len(p)))
	return nil
}

// Appended tells the writer, before its first write, that the new content
// is the file's committed content with bytes appended to it: its first
// prefix bytes are unchanged, so a plain filesystem writes only the pages
// from the one holding byte prefix on (the shadow is charged those), where
// a save is otherwise a rewrite of the whole file.
func (w *Writer) Appended(prefix int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.change.Truncated, w.kept = false, max(prefix, 0)
}

// ReadFrom ingests the n bytes of r at off, which must not be below Size,
// as WriteAt of them would. It reads them straight into the chunk being
// filled where it can, so that a staged file's bytes are moved once on
// their way to the encoders, not twice; buf takes the reads that cannot go
// there (the file's first bytes, those after a long hole).
func (w *Writer) ReadFrom(r io.ReaderAt, off, n int64, mtime int64, buf []byte) error {
	if off < 0 || n < 0 || off+n > MaxFileSize {
		return fmt.Errorf("write of %d bytes at %d: %w", n, off, syscall.EFBIG)
	}
	for end := off + n; off < end; {
		k, err := w.readOnce(r, off, end, mtime, buf)
		if err != nil {
			return err
		}
		off += k
	}
	return nil
}

// readOnce ingests the next bytes of r at off, up to end, with one read.
// The read runs under w.mu: the chunk it fills belongs to the ingest.
func (w *Writer) readOnce(r io.ReaderAt, off, end int64, mtime int64, buf []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in, err := w.open()
	if err != nil {
		return 0, err
	}
	want := min(int64(len(buf)), end-off)
	if err := w.accept(in, off, int(want), mtime); err != nil {
		return 0, err
	}
	dst := in.spare()
	if dst == nil {
		dst = buf
	}
	k, err := r.ReadAt(dst[:min(int64(len(dst)), want)], off)
	if k == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w at %d of %d", io.ErrUnexpectedEOF, off, end)
		}
		return 0, err
	}
	return int64(k), w.take(in, dst[:k], off)
}

// Extend grows the content to size with a hole, as a truncate of the file
// up to size would; a size at or below Size changes nothing but mtime.
func (w *Writer) Extend(size int64, mtime int64) error {
	if size < 0 || size > MaxFileSize {
		return fmt.Errorf("extend to %d: %w", size, syscall.EFBIG)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	in, err := w.open()
	if err != nil {
		return err
	}
	w.mtime = mtime
	if size > in.Size() {
		return in.Hole(size - in.Size())
	}
	return nil
}

// open returns the ingest, or an error once the writer is finished. Call
// with w.mu held.
func (w *Writer) open() (*ingest, error) {
	if w.ingest == nil {
		return nil, fmt.Errorf("writer of %s used after its commit or abort", w.target.pathNow())
	}
	return w.ingest, nil
}

// Commit makes the content the file's committed content. The writer is
// finished afterwards, whether or not the commit succeeded.
func (w *Writer) Commit() error {
	family := policy.FamilyOf(w.target.pathNow())
	w.s.committing.begin(family, w)
	defer w.s.committing.end(family, w)
	p, err := w.finish()
	if err != nil {
		return err
	}
	return w.commitPending(p)
}

// finish finishes the ingest: its result is ready to commit (commitPending)
// or discard. The writer is finished afterwards; on failure the ingest is
// aborted.
func (w *Writer) finish() (*pendingVersion, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.unreserve()
	in, err := w.open()
	if err != nil {
		return nil, err
	}
	w.ingest = nil
	p, err := in.Finish()
	if err != nil {
		in.Abort()
		return nil, err
	}
	return p, nil
}

func (w *Writer) commitPending(p *pendingVersion) error {
	// The file may have been renamed since its ingest finished: it joins
	// its name's family now.
	if path := w.target.pathNow(); path != p.v.Path {
		p.v.Path, p.v.Family = path, policy.FamilyOf(path)
	}
	w.mu.Lock()
	change, mtime := w.change, w.mtime
	w.mu.Unlock()
	if p.Size() == 0 {
		// An empty file has no version: it must not become its family's
		// reference, and there is nothing to store.
		w.s.discard(p)
		return w.s.updateLogged(func(tx *txn) error { return tx.commitEmpty(w.ino, change, mtime) })
	}
	if err := w.s.commit(w.ino, p, change, mtime); err != nil {
		w.s.discard(p)
		return err
	}
	return nil
}

// Abort drops the uncommitted content. It does nothing to a writer already
// finished.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.unreserve()
	if w.ingest != nil {
		w.ingest.Abort()
		w.ingest = nil
	}
}

// noteDirty adds the pages of [from, to) to what a plain filesystem writes
// for the change.
func (s *Store) noteDirty(c *wear.Change, from, to int64) {
	if s.wear == nil || to <= from {
		return
	}
	ps := s.wear.PageSize()
	first, last := from/ps, (to+ps-1)/ps
	if n := len(c.Dirty); n > 0 && c.Dirty[n-1].First+c.Dirty[n-1].Count >= first {
		d := &c.Dirty[n-1]
		d.Count = max(d.First+d.Count, last) - d.First
		return
	}
	c.Dirty = append(c.Dirty, wear.PageRange{First: first, Count: last - first})
}

// commitEmpty makes inode ino an empty file.
func (tx *txn) commitEmpty(ino meta.Ino, change wear.Change, mtime int64) error {
	n, err := tx.mtx.Inode(ino)
	if err != nil {
		return err
	}
	old := n.Version
	if mtime == 0 {
		mtime = tx.s.now().UnixNano()
	}
	n.Version, n.Size, n.Mtime, n.Ctime = 0, 0, mtime, contentCtime(n.Ctime, mtime)
	if err := tx.mtx.PutInode(n); err != nil {
		return err
	}
	if err := tx.releaseVersion(old, liveClaim); err != nil {
		return err
	}
	return tx.shadowCommit(ino, change, 0)
}

package chain

import (
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// MaxFileSize is the largest file the store keeps, as on ext4 with 4 KiB
// blocks (16 TiB): past it writes and truncates fail with EFBIG at once
// instead of committing petabytes of zeros.
const MaxFileSize = 1 << 44

// Writer holds the uncommitted content of one file, shared by all its open
// handles. Sequential writes from the start (a new file, or O_TRUNC) stream
// straight into an ingest; the first write elsewhere, a truncate, or a read
// turns the writer into a draft (see draft), which is correct for any access
// pattern and is re-ingested at commit.
type Writer struct {
	s    *Store
	ino  meta.Ino
	path string

	mu     sync.Mutex
	ingest *ingest // streaming mode
	draft  *draft  // fallback mode
	mtime  int64
}

// NewWriter starts changing file ino (at path, which names its family). With
// truncate the content starts empty; otherwise it starts as the committed
// content of the file.
func (s *Store) NewWriter(ino meta.Ino, path string, truncate bool) (*Writer, error) {
	w := &Writer{s: s, ino: ino, path: path}
	if truncate {
		in, err := s.newIngest(path)
		if err != nil {
			return nil, err
		}
		w.ingest = in
		return w, nil
	}
	n, err := s.Inode(ino)
	if err != nil {
		return nil, err
	}
	if n.Size == 0 {
		// Nothing to keep: writes from the start can stream.
		return s.NewWriter(ino, path, true)
	}
	base, err := s.OpenVersion(n.Version)
	if err != nil {
		return nil, err
	}
	w.draft = newDraft(s, base, nil)
	return w, nil
}

// Size is the current size of the uncommitted content.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ingest != nil {
		return w.ingest.Size()
	}
	return w.draft.size
}

// WriteAt writes p at off.
func (w *Writer) WriteAt(p []byte, off int64, mtime int64) (int, error) {
	if off < 0 || off+int64(len(p)) > MaxFileSize {
		return 0, fmt.Errorf("write of %d bytes at %d: %w", len(p), off, syscall.EFBIG)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mtime = mtime
	if w.ingest != nil && off == w.ingest.Size() {
		if err := w.ingest.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if err := w.toDraft(); err != nil {
		return 0, err
	}
	return w.draft.WriteAt(p, off)
}

// ReadAt reads the uncommitted content.
func (w *Writer) ReadAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.toDraft(); err != nil {
		return 0, err
	}
	return w.draft.ReadAt(p, off)
}

// Truncate sets the size of the uncommitted content.
func (w *Writer) Truncate(size int64, mtime int64) error {
	if size < 0 || size > MaxFileSize {
		return fmt.Errorf("truncate to %d: %w", size, syscall.EFBIG)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mtime = mtime
	if w.ingest != nil && size == w.ingest.Size() {
		return nil
	}
	if err := w.toDraft(); err != nil {
		return err
	}
	return w.draft.Truncate(size)
}

// toDraft ends streaming: what was ingested becomes a pending version that
// is the draft's base.
func (w *Writer) toDraft() error {
	if w.draft != nil {
		return nil
	}
	p, err := w.ingest.Finish()
	if err != nil {
		return err
	}
	w.ingest = nil
	w.s.registerPending(p)
	base, err := w.s.OpenVersion(p.v.ID)
	if err != nil {
		w.s.discard(p)
		return err
	}
	w.draft = newDraft(w.s, base, p)
	// The file was rewritten from empty: for the shadow, a truncate to 0.
	w.draft.truncated, w.draft.truncMin = true, 0
	return nil
}

// Commit makes the content the file's committed content. The writer is
// finished afterwards, whether or not the commit succeeded.
func (w *Writer) Commit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ingest != nil {
		in := w.ingest
		w.ingest = nil
		p, err := in.Finish()
		if err != nil {
			in.Abort()
			return err
		}
		return w.commitPending(p, w.s.rewriteChange(p.Size()))
	}
	d := w.draft
	defer d.release()
	in, err := w.s.newIngest(w.path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < d.size; {
		n, err := d.ReadAt(buf[:min(int64(len(buf)), d.size-off)], off)
		if err != nil && err != io.EOF {
			in.Abort()
			return fmt.Errorf("re-ingest %s at %d: %w", w.path, off, err)
		}
		if err := in.Write(buf[:n]); err != nil {
			in.Abort()
			return err
		}
		off += int64(n)
	}
	p, err := in.Finish()
	if err != nil {
		in.Abort()
		return err
	}
	return w.commitPending(p, d.shadowChange())
}

func (w *Writer) commitPending(p *pendingVersion, change wear.Change) error {
	if p.Size() == 0 {
		// An empty file has no version: it must not become its family's
		// reference, and there is nothing to store.
		w.s.discard(p)
		return w.s.update(func(tx *txn) error { return tx.commitEmpty(w.ino, change, w.mtime) })
	}
	if err := w.s.commit(w.ino, p, change, w.mtime); err != nil {
		w.s.discard(p)
		return err
	}
	return nil
}

// Abort drops the uncommitted content.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ingest != nil {
		w.ingest.Abort()
		w.ingest = nil
	}
	if w.draft != nil {
		w.draft.release()
		w.draft = nil
	}
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
	n.Version, n.Size, n.Mtime, n.Ctime = 0, 0, mtime, tx.s.now().UnixNano()
	if err := tx.mtx.PutInode(n); err != nil {
		return err
	}
	if err := tx.releaseVersion(old, liveClaim); err != nil {
		return err
	}
	return tx.shadowCommit(ino, change, 0)
}

// SetMtime sets the modification time the commit will record (utimens on a
// file being written must not be undone by its commit).
func (w *Writer) SetMtime(mtime int64) {
	w.mu.Lock()
	w.mtime = mtime
	w.mu.Unlock()
}

package chain

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"syscall"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// MaxFileSize is the largest file the store keeps, as on ext4 with 4 KiB
// blocks (16 TiB): past it writes and truncates fail with EFBIG at once
// instead of committing petabytes of zeros.
const MaxFileSize = 1 << 44

// Writer holds the uncommitted content of one file, shared by all its open
// handles. Writes stream straight into an ingest when they arrive in order
// from the start (a new file, O_TRUNC), and also when they arrive somewhat
// out of order or after a truncate that grew the file: the bytes past the
// ingest's end wait in a bounded window (maxWindowBytes) until the bytes
// before them arrive, and what was never written is zeros. That covers
// safetensors' ftruncate-then-mmap saves, whose pages reach us as
// writebacks in roughly ascending order. A write or a read below what was
// already ingested, a truncate below it, or a window that overflows turns
// the writer into a draft (see draft), which is correct for any access
// pattern and is re-ingested at commit (the fallback).
type Writer struct {
	s      *Store
	ino    meta.Ino
	target refTarget

	mu          sync.Mutex
	ingest      *ingest  // streaming mode
	front       int64    // streaming: bytes accepted in order (ingested, then queued)
	size        int64    // streaming: the file's size, >= front
	window      []extent // streaming: bytes past front, sorted, disjoint
	windowBytes int64
	draft       *draft // fallback mode
	mtime       int64
	resv        int64 // backend blocks reserved for the accepted bytes (reserve.go)

	// Write-back (writeback.go): bytes accepted in order wait here for
	// the feeder goroutine, which alone uses the ingest while it runs.
	queue     [][]byte
	queued    int64
	feeding   bool
	dropQueue bool
	feedErr   error
	idle      sync.Cond // the feeder stopped
}

// extent is bytes of the window at file offset off.
type extent struct {
	off  int64
	data []byte
}

func (e extent) end() int64 { return e.off + int64(len(e.data)) }

// The window's bounds: bytes, and extents (so that inserting stays cheap).
const (
	maxWindowBytes   = 64 << 20
	maxWindowExtents = 1024
)

// NewWriter starts changing file ino; path tells its name at any moment
// (it names the family, and may change while the file is written). With
// truncate the content starts empty; otherwise it starts as the committed
// content of the file. Either way, a file that had content is rewritten in
// place, and its previous content is its reference of choice.
func (s *Store) NewWriter(ino meta.Ino, path func() string, truncate bool) (*Writer, error) {
	n, err := s.Inode(ino)
	if err != nil {
		return nil, err
	}
	w := &Writer{s: s, ino: ino, target: refTarget{path: path, prev: n.Version}}
	w.idle.L = &w.mu
	if truncate || n.Size == 0 {
		w.ingest = s.newIngest(w.target)
		w.ingest.owner = w
		return w, nil
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
		return w.size
	}
	return w.draft.size
}

// Streamed reports whether the content is still streaming (no fallback).
func (w *Writer) Streamed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ingest != nil
}

// WriteAt writes p at off.
func (w *Writer) WriteAt(p []byte, off int64, mtime int64) (int, error) {
	if off < 0 || off+int64(len(p)) > MaxFileSize {
		return 0, fmt.Errorf("write of %d bytes at %d: %w", len(p), off, syscall.EFBIG)
	}
	// Room in the write-back queues is claimed before the writer's lock,
	// which the feeder needs to make room; it is given back below unless
	// the bytes are queued.
	claim := int64(0)
	if w.s.wb.enabled() {
		claim = int64(len(p))
		w.s.wb.acquire(claim)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { w.s.wb.add(-claim) }()
	if err := w.reserveFor(len(p)); err != nil {
		return 0, err
	}
	defer w.settle()
	w.mtime = mtime
	if w.ingest != nil {
		if w.feedErr != nil {
			return 0, w.feedErr
		}
		front, end := w.front, off+int64(len(p))
		switch {
		case off == front:
			w.cutWindow(off, end)
			b := p
			if w.s.wb.enabled() {
				b = bufpool.Get(len(p))
				copy(b, p)
				claim = 0 // the queue holds it now
			}
			if err := w.push(b); err != nil {
				return 0, err
			}
			w.front = end
			w.size = max(w.size, end)
			if err := w.drain(); err != nil {
				return 0, err
			}
			return len(p), nil
		case off > front && w.windowBytes+int64(len(p)) <= maxWindowBytes && len(w.window) < maxWindowExtents &&
			w.s.dirty.take(int64(len(p))):
			w.s.dirty.add(-int64(len(p))) // counted again as the window takes it
			w.cutWindow(off, end)
			w.insertWindow(extent{off: off, data: append([]byte(nil), p...)})
			w.size = max(w.size, end)
			return len(p), nil
		}
	}
	if err := w.toDraft(); err != nil {
		return 0, err
	}
	return w.draft.WriteAt(p, off)
}

// cutWindow drops the window's bytes in [from, to): newer bytes replace them.
func (w *Writer) cutWindow(from, to int64) {
	if len(w.window) == 0 || to <= w.window[0].off || from >= w.window[len(w.window)-1].end() {
		return
	}
	kept := w.window[:0:0]
	for _, e := range w.window {
		if e.end() <= from || e.off >= to {
			kept = append(kept, e)
			continue
		}
		w.windowDelta(-int64(len(e.data)))
		if e.off < from {
			left := extent{off: e.off, data: e.data[:from-e.off]}
			kept = append(kept, left)
			w.windowDelta(int64(len(left.data)))
		}
		if e.end() > to {
			right := extent{off: to, data: e.data[to-e.off:]}
			kept = append(kept, right)
			w.windowDelta(int64(len(right.data)))
		}
	}
	w.window = kept
}

// insertWindow adds e, which overlaps nothing in the window.
func (w *Writer) insertWindow(e extent) {
	i := sort.Search(len(w.window), func(i int) bool { return w.window[i].off > e.off })
	w.window = append(w.window, extent{})
	copy(w.window[i+1:], w.window[i:])
	w.window[i] = e
	w.windowDelta(int64(len(e.data)))
}

// windowDelta counts d more bytes in the window, for the writer and for the
// store's memory bound.
func (w *Writer) windowDelta(d int64) {
	w.windowBytes += d
	w.s.dirty.add(d)
}

// dropWindow forgets the window.
func (w *Writer) dropWindow() {
	w.windowDelta(-w.windowBytes)
	w.window = nil
}

// drain hands the ingest the window's bytes that now follow front.
func (w *Writer) drain() error {
	for len(w.window) > 0 && w.window[0].off == w.front {
		e := w.window[0]
		w.window = w.window[1:]
		w.windowDelta(-int64(len(e.data)))
		if w.s.wb.enabled() {
			w.s.wb.add(int64(len(e.data))) // already in memory: no waiting
		}
		if err := w.push(e.data); err != nil {
			return err
		}
		w.front = e.end()
	}
	return nil
}

// ReadAt reads the uncommitted content. Bytes past the ingest's end are
// served from the window (zeros where nothing was written), so a program
// that maps a file it just sized and faults its pages in does not end
// streaming; a read of bytes already ingested does.
func (w *Writer) ReadAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ingest != nil && off >= w.front {
		if off >= w.size {
			return 0, io.EOF
		}
		n := int(min(int64(len(p)), w.size-off))
		clear(p[:n])
		for _, e := range w.window {
			if e.end() <= off || e.off >= off+int64(n) {
				continue
			}
			from := max(e.off, off)
			copy(p[from-off:n], e.data[from-e.off:])
		}
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	defer w.settle()
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
	defer w.settle()
	w.mtime = mtime
	if w.ingest != nil && size >= w.front {
		// Growing, or cutting only what the window holds: the bytes
		// past size are gone, and growing again shows zeros.
		w.cutWindow(size, MaxFileSize+1)
		w.size = size
		return nil
	}
	if err := w.toDraft(); err != nil {
		return err
	}
	return w.draft.Truncate(size)
}

// toDraft ends streaming: what was ingested becomes a pending version that
// is the draft's base, and the window's bytes are written over it.
func (w *Writer) toDraft() error {
	if w.draft != nil {
		return nil
	}
	if err := w.settleQueue(false); err != nil {
		return err
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
	d := newDraft(w.s, base, p)
	// The file was rewritten from empty: for the shadow, a truncate to 0
	// and every page written.
	d.truncated, d.truncMin, d.rewritten = true, 0, p.Size()
	window, size := w.window, w.size
	w.draft = d
	defer w.dropWindow()
	if size > d.size {
		if err := d.Truncate(size); err != nil {
			return err
		}
	}
	for _, e := range window {
		if _, err := d.WriteAt(e.data, e.off); err != nil {
			return err
		}
	}
	return nil
}

// Commit makes the content the file's committed content. The writer is
// finished afterwards, whether or not the commit succeeded.
func (w *Writer) Commit() error {
	family := policy.FamilyOf(w.target.pathNow())
	w.s.committing.begin(family, w)
	defer w.s.committing.end(family, w)
	return w.commit()
}

// CommitInBackground commits on a goroutine and sends the result on the
// channel returned. The commit counts as under way from the call on: a
// save of the same family that chooses its reference meanwhile waits for
// it (so that it is coded against this content, not stored as a baseline).
func (w *Writer) CommitInBackground() <-chan error {
	family := policy.FamilyOf(w.target.pathNow())
	w.s.committing.begin(family, w)
	done := make(chan error, 1)
	go func() {
		err := w.commit()
		w.s.committing.end(family, w)
		done <- err
	}()
	return done
}

func (w *Writer) commit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.unreserve()
	defer w.dropWindow()
	if w.ingest != nil {
		if err := w.settleQueue(false); err != nil {
			w.ingest.Abort()
			w.ingest = nil
			return err
		}
		in := w.ingest
		change := w.streamChange()
		w.ingest = nil
		p, err := w.finishStream(in)
		if err != nil {
			in.Abort()
			return err
		}
		return w.commitPending(p, change)
	}
	d := w.draft
	defer d.release()
	in := w.s.newIngest(w.target)
	in.owner = w
	in.fallback = true
	buf := make([]byte, 1<<20)
	dirty := d.dirtyPages()
	for off := int64(0); off < d.size; {
		// Holes (never written, or zeros in the base) are not read.
		next, err := d.nextData(off, dirty)
		if err != nil {
			in.Abort()
			return fmt.Errorf("re-ingest %s at %d: %w", w.target.pathNow(), off, err)
		}
		if next > off {
			if err := in.Hole(next - off); err != nil {
				in.Abort()
				return err
			}
			off = next
			continue
		}
		n, err := d.ReadAt(buf[:min(int64(len(buf)), d.size-off)], off)
		if err != nil && err != io.EOF {
			in.Abort()
			return fmt.Errorf("re-ingest %s at %d: %w", w.target.pathNow(), off, err)
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

// streamChange is what a plain filesystem writes for a streamed file: it
// was emptied, then the pages written (the ingested prefix and the window's
// extents); bytes a truncate declared and nothing wrote are a hole there,
// never written. Call before finishStream fills them in.
func (w *Writer) streamChange() wear.Change {
	if w.s.wear == nil {
		return wear.Change{}
	}
	ps := w.s.wear.PageSize()
	c := wear.Change{Truncated: true}
	add := func(from, to int64) {
		first, last := from/ps, (to+ps-1)/ps
		if last <= first {
			return
		}
		if n := len(c.Dirty); n > 0 && c.Dirty[n-1].First+c.Dirty[n-1].Count >= first {
			d := &c.Dirty[n-1]
			d.Count = max(d.First+d.Count, last) - d.First
			return
		}
		c.Dirty = append(c.Dirty, wear.PageRange{First: first, Count: last - first})
	}
	add(0, w.front)
	for _, e := range w.window {
		add(e.off, e.end())
	}
	return c
}

// finishStream ingests the window and the holes between and after its
// extents (bytes a truncate declared and nothing wrote), then finishes.
func (w *Writer) finishStream(in *ingest) (*pendingVersion, error) {
	fill := func(to int64) error {
		if to > in.Size() {
			return in.Hole(to - in.Size())
		}
		return nil
	}
	for _, e := range w.window {
		if err := fill(e.off); err != nil {
			return nil, err
		}
		if err := in.Write(e.data); err != nil {
			return nil, err
		}
	}
	w.dropWindow()
	if err := fill(w.size); err != nil {
		return nil, err
	}
	return in.Finish()
}

func (w *Writer) commitPending(p *pendingVersion, change wear.Change) error {
	// The file may have been renamed since its ingest finished (a commit
	// after close runs in the background): it joins its name's family now.
	if path := w.target.pathNow(); path != p.v.Path {
		p.v.Path, p.v.Family = path, policy.FamilyOf(path)
	}
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
	defer w.unreserve()
	w.dropWindow()
	_ = w.settleQueue(true)
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

// Mtime is the modification time the commit will record (0: the commit's).
func (w *Writer) Mtime() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mtime
}

// SetMtime sets the modification time the commit will record (utimens on a
// file being written must not be undone by its commit).
func (w *Writer) SetMtime(mtime int64) {
	w.mu.Lock()
	w.mtime = mtime
	w.mu.Unlock()
}

package fs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/sirupsen/logrus"
)

// Saves through the page cache. A file opened for writing gets a staging
// file in the store directory (chain/staging). Where the kernel allows it
// (FUSE passthrough: Linux 6.9 and later, a daemon with CAP_SYS_ADMIN) the
// kernel serves the handle's reads, writes and mmap straight from the
// staging file, and none of them reach the daemon; elsewhere the daemon
// writes the staging file itself. After the last writer's release (or at
// fsync) the store reads the staging file sequentially and encodes it as it
// would a sequential save (Store.CommitFile), then deletes it. Every write
// pattern therefore stores what a sequential save of the same bytes stores,
// the daemon holds no save in its memory, and a save closed before the
// daemon dies is still on the host's filesystem: the next open of the store
// ingests it (Store.RecoverStaged).
//
// The kernel serves an inode either through its page cache (requests to
// the daemon: "cached" handles) or from one backing file ("passthrough"
// handles), never both at once, and every passthrough handle of an inode
// shares one backing file; an open that breaks this fails with EIO. So a
// new handle joins the mode of the handles already open, and go-fuse, which
// registers the backing file with the kernel at the first passthrough open
// of an inode and keeps it until the last one is released, is always handed
// the same file for an inode: FS.backings remembers it until a moment after
// its last handle's release.

// stagedFile is a staging file, kept open while requests use it.
type stagedFile struct {
	*staging.File
	io   sync.RWMutex
	gone bool
	// committed: the content equals the inode's committed content (after a
	// commit of it landed), so it can back a new writer as it is.
	committed bool
	// path is the name of the file now (its node's path).
	path func() string
	// born is when the content started (its pages' dirty age, for the
	// write-back model, wear.go); charged: the device was charged for it (under
	// the model's lock, stagingCache).
	born    time.Time
	charged bool
	// appendOnly: since it was made from the inode's committed content
	// (appendFrom bytes), writers only appended to it (O_APPEND), so a
	// plain filesystem writes only the pages from that end on
	// (chain.Writer.Appended). Under the file's of.mu.
	appendOnly bool
	appendFrom int64
	// closedAt is when its last writer closed it (Unix ns; 0: open for
	// writing), for the cut a replicating store publishes (cut.go).
	closedAt atomic.Int64
}

var errGone = errors.New("staging file gone")

// use runs fn on the open file unless the staging file was removed.
func (sf *stagedFile) use(fn func(f *os.File) error) error {
	sf.io.RLock()
	defer sf.io.RUnlock()
	if sf.gone {
		return errGone
	}
	return fn(sf.File.File)
}

// remove deletes the staging file once no request uses it.
func (sf *stagedFile) remove() {
	sf.io.Lock()
	defer sf.io.Unlock()
	if sf.gone {
		return
	}
	sf.gone = true
	if err := sf.Remove(); err != nil {
		logrus.WithError(err).Warn("remove staging file")
	}
}

// attr is the staged content's size and modification time.
func (sf *stagedFile) attr() (size, mtime int64, ok bool) {
	err := sf.use(func(f *os.File) error {
		st, err := f.Stat()
		if err == nil {
			size, mtime = st.Size(), st.ModTime().UnixNano()
		}
		return err
	})
	return size, mtime, err == nil
}

// backing is the file the kernel may hold registered as an inode's backing
// file for passthrough, with the passthrough handles that use it.
type backing struct {
	sf   *stagedFile
	refs int
	at   time.Time // when refs last fell to zero
	// until: a read copy (readcopy.go) no writer has taken over is kept
	// unused until then.
	until time.Time
}

// backingLinger is how long a backing file is remembered after its last
// passthrough handle is released: go-fuse unregisters it with the kernel
// right after our Release returns, and an open meanwhile would be handed
// it again. FS.linger holds it (tests shorten it).
const backingLinger = 2 * time.Second

// stagingDir is the directory of staging files; a filesystem built without
// one (tests on a bare store) gets a temporary one, which no crash recovery
// reads.
func (f *FS) stagingDir() (*staging.Dir, error) {
	f.stagingOnce.Do(func() {
		if f.Staging != nil {
			return
		}
		dir, err := os.MkdirTemp("", "ckptfs-staging-")
		if err == nil {
			f.stagingTemp = dir
			f.Staging, err = staging.OpenDir(dir)
		}
		if err != nil {
			f.stagingErr = fmt.Errorf("staging directory: %w", err)
			return
		}
		logrus.Warnf("no staging directory given: staging in %s, which crash recovery does not read", dir)
	})
	return f.Staging, f.stagingErr
}

// PassthroughOn reports whether handles of files being written are served
// by the kernel from their staging files.
func (f *FS) PassthroughOn() bool { return f.passthrough.Load() }

// Mode names how saves reach their staging files, for the report.
func (f *FS) Mode() string {
	if f.PassthroughOn() {
		return "passthrough"
	}
	return "daemon-written"
}

// passthroughRefused notes that a request of a passthrough handle reached
// the daemon: the kernel refused the backing file (go-fuse then stops asking
// for it). Saves go on, written by the daemon.
func (f *FS) passthroughRefused() {
	if f.passthrough.Swap(false) {
		logrus.Warn("FUSE passthrough refused by the kernel: the daemon writes staging files from now on")
	}
}

// stageForWrite gives of a staging file for a handle opening for writing,
// holding the committed content unless trunc; appending: the handle only
// appends (O_APPEND); mapped: it may also map the file (O_RDWR), and so
// change its first bytes without a request reaching the daemon. Call with
// of.mu held.
//
// The staging file may hold a save closed and not committed yet (the
// release of its last writer has not come, or it settles: settle.go),
// which a crash while this writer has it must not lose: a writer that only
// appends keeps it as the file's first bytes (staging.Appending), any
// other, and one that may map the file, has it committed first.
func (n *Node) stageForWrite(of *openFile, trunc, appending, mapped bool) syscall.Errno {
	appending = appending && !trunc
	n.noteWriterOpen(of, appending) // before waitCommit, which would wake a settling commit
	of.waitCommit()                 // the new content starts from the committed one
	if !appending || mapped {
		if errno := n.secureClosed(of); errno != 0 {
			return errno
		}
	}
	if of.stage == nil {
		sf, errno := n.newStage(trunc)
		if errno != 0 {
			return errno
		}
		of.setStage(sf, n.fsys)
		of.save.Staged(trunc)
		if appending {
			size, _, _ := sf.attr()
			sf.appendOnly, sf.appendFrom = true, size
		}
	} else if trunc {
		if err := of.stage.use(func(f *os.File) error { return f.Truncate(0) }); err != nil {
			return toErrno(err)
		}
		of.save.Change()
		of.stage.committed = false
	}
	of.stage.noteReopened()
	// A writer that may map the file can change its first bytes unseen
	// (passthrough): the staging file never keeps a closed save for it,
	// whatever its name said (secureClosed committed that save).
	return toErrno(of.stage.markWriting(appending && !mapped))
}

// markWriting records that a writer changes sf (its name is its record:
// chain/staging): a writer that only appends to a closed save keeps that
// save as the file's first bytes; otherwise the file is open, and a crash
// keeps the committed content, and sf is no longer only appended to.
// Call with the file's of.mu held.
func (sf *stagedFile) markWriting(appending bool) error {
	if !appending {
		sf.appendOnly = false
	}
	switch st := sf.State(); {
	case appending && st == staging.Closed:
		return sf.keepClosed()
	case appending && st == staging.Appending:
		return nil // its closed save stays its first bytes
	}
	return sf.Mark(staging.Open)
}

// keepClosed records sf's content now as the closed save a crash keeps,
// while writers append to it.
func (sf *stagedFile) keepClosed() error {
	size, _, ok := sf.attr()
	if !ok {
		return errGone
	}
	return sf.MarkAppending(size)
}

// holdsClosedSave reports whether sf holds a save closed and not
// committed yet.
func (sf *stagedFile) holdsClosedSave() bool {
	st := sf.State()
	return st == staging.Closed || st == staging.Appending
}

// secureClosed commits of's staging file now if it holds a save closed and
// not committed yet, before a change by a writer that does not only
// append. A save waiting for room on the host (hostspace.go) cannot be
// committed: the writer takes it over as it is. Call with of.mu held.
func (n *Node) secureClosed(of *openFile) syscall.Errno {
	sf := of.stage
	if sf == nil || !of.save.IsChanged() || of.save.IsKept() || !sf.holdsClosedSave() {
		return 0
	}
	if sf.State() == staging.Appending {
		// Only the closed save: what writers appended to it since was
		// neither closed nor synced, and a crash must not keep it.
		return n.commitPrefix(of, sf.Keep())
	}
	return n.commitNow(of)
}

// newStage returns the staging file for a new writer: the inode's backing
// file if the kernel may still hold one (it must stay the inode's only
// backing), else a new file; with the committed content unless trunc.
func (n *Node) newStage(trunc bool) (*stagedFile, syscall.Errno) {
	f := n.fsys
	f.backingMu.Lock()
	b := f.backings[n.ino]
	var claimErr error
	if b != nil && !b.sf.gone {
		// Claimed: a dropBacking due now finds it used again and leaves
		// it, where it would otherwise delete the file this writer is
		// about to use (the kill test's close once failed with ENOENT);
		// a later one drops it if no passthrough handle takes it. Marked
		// open at once, it is no longer a copy any dropBacking deletes,
		// however long the copy below takes (a random-operation seed
		// with a short linger lost the file under a slow copy).
		b.at, b.until = time.Now(), time.Time{}
		time.AfterFunc(f.linger, func() { f.dropBacking(n.ino, b) })
		if b.sf.State() == staging.Done {
			claimErr = b.sf.Mark(staging.Open)
		}
	}
	f.backingMu.Unlock()
	if b != nil && !b.sf.gone {
		sf := b.sf
		if claimErr != nil {
			return nil, toErrno(claimErr)
		}
		failed := func(errno syscall.Errno) (*stagedFile, syscall.Errno) {
			_ = sf.Mark(staging.Done) // a copy again, for dropBacking
			return nil, errno
		}
		if trunc || !sf.committed {
			if err := sf.use(func(f *os.File) error { return f.Truncate(0) }); err != nil {
				return failed(toErrno(err))
			}
			if !trunc {
				if errno := n.copyCommitted(sf); errno != 0 {
					return failed(errno)
				}
			}
		}
		f.stagedRestart(sf) // a new content: its pages' age starts now
		sf.committed, sf.born = false, time.Now()
		n.stageTimes(sf, trunc)
		return sf, 0
	}
	dir, err := f.stagingDir()
	if err != nil {
		return nil, toErrno(err)
	}
	file, err := dir.Create(uint64(n.ino))
	if err != nil {
		return nil, toErrno(err)
	}
	sf := &stagedFile{File: file, born: time.Now(), path: n.path}
	if !trunc {
		if errno := n.copyCommitted(sf); errno != 0 {
			sf.remove()
			return nil, errno
		}
	}
	n.stageTimes(sf, trunc)
	return sf, 0
}

// stageTimes gives sf, the inode's new staging file, the inode's times:
// until written, the file keeps them. Emptied of content (O_TRUNC), it
// keeps its own, now, since a truncate changes mtime and ctime.
func (n *Node) stageTimes(sf *stagedFile, trunc bool) {
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil || trunc && in.Size > 0 {
		return
	}
	_ = sf.use(func(*os.File) error {
		return os.Chtimes(sf.Path(), time.Unix(0, in.Atime), time.Unix(0, in.Mtime))
	})
}

// testHookCopy, when set, runs in each copyCommitted while it holds its
// slot (tests only).
var testHookCopy atomic.Pointer[func()]

// copyCommitted writes the committed content into sf (a file opened for
// writing without O_TRUNC is changed in place); holes stay holes.
func (n *Node) copyCommitted(sf *stagedFile) syscall.Errno {
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil {
		return toErrno(err)
	}
	if in.Size == 0 || in.Version == 0 {
		return toErrno(sf.use(func(f *os.File) error { return f.Truncate(in.Size) }))
	}
	r, err := n.fsys.store.OpenVersion(in.Version)
	if err != nil {
		return toErrno(err)
	}
	// Many writers opening their files in place at once (every rank
	// rewriting its shard) would otherwise each hold a buffer and a
	// reader's rebuilds at the same moment.
	n.fsys.copySlots <- struct{}{}
	defer func() { <-n.fsys.copySlots }()
	if hook := testHookCopy.Load(); hook != nil {
		(*hook)()
	}
	err = sf.use(func(f *os.File) error {
		if err := f.Truncate(r.Size()); err != nil {
			return err
		}
		buf := bufpool.Get(1 << 20)
		defer bufpool.Put(buf)
		for off := int64(0); off < r.Size(); {
			data, err := r.SeekExtent(off, true)
			if err != nil {
				return err
			}
			if data >= r.Size() {
				return nil
			}
			hole, err := r.SeekExtent(data, false)
			if err != nil {
				return err
			}
			for off = data; off < hole; {
				k, err := r.ReadAt(buf[:min(int64(len(buf)), hole-off)], off)
				if k > 0 {
					if _, werr := f.WriteAt(buf[:k], off); werr != nil {
						return werr
					}
					off += int64(k)
				}
				if err != nil && err != io.EOF {
					return err
				}
				if k == 0 {
					return fmt.Errorf("committed content ends at %d of %d", off, r.Size())
				}
			}
		}
		return nil
	})
	if err != nil {
		return toErrno(fmt.Errorf("copy %s into its staging file: %w", n.path(), err))
	}
	return 0
}

// chooseMode decides whether a new handle of the inode is a passthrough
// handle, and counts it. Call with of.mu held, after stageForWrite for a
// writer.
//
// An O_DIRECT open is served by the daemon unless passthrough handles of
// the inode are open (which every open must then join): the kernel opens a
// handle's backing file with the flags of its open, and fcntl(F_SETFL) of
// the handle does not reach it, so the unaligned last block that dd
// oflag=direct (and writers like it) write after clearing O_DIRECT would
// fail with EINVAL where a plain filesystem takes it.
func (n *Node) chooseMode(of *openFile, writable, direct bool) (*stagedFile, bool) {
	f := n.fsys
	if !writable {
		n.readerOpened(of) // before Open decides whether the kernel keeps its cache
	}
	// A writer on a nearly full device is served by the daemon, which sees
	// its writes and refuses those the device cannot hold (spaceLow).
	if !f.PassthroughOn() || of.cached > 0 || of.passthrough == 0 && (direct || writable && f.spaceLow()) {
		of.cached++
		return nil, false
	}
	f.backingMu.Lock()
	defer f.backingMu.Unlock()
	b := f.backings[n.ino]
	switch {
	case b != nil && !b.sf.gone && (b.refs > 0 && !writable || b.sf == of.stage):
		// The kernel may hold b.sf as the backing: every handle shares it.
	case !writable && !f.NoReadCopies && b != nil && !b.sf.gone && of.stage == nil && b.sf.committed && b.sf.State() == staging.Done:
		// A copy of the committed content that no handle uses (a read
		// copy, or a save's staging file kept a moment after its commit):
		// the reader is served from it (readcopy.go).
	case writable && (b == nil || b.sf.gone):
		b = &backing{sf: of.stage}
		f.backings[n.ino] = b
	default:
		of.cached++
		return nil, false
	}
	b.refs++
	of.passthrough++
	if writable {
		of.save.Change() // its writes never reach us
	}
	return b.sf, true
}

// dropMode uncounts a released handle. Call with of.mu held.
func (n *Node) dropMode(of *openFile, pt bool) {
	if !pt {
		of.cached--
		return
	}
	of.passthrough--
	f := n.fsys
	f.backingMu.Lock()
	defer f.backingMu.Unlock()
	b := f.backings[n.ino]
	if b == nil {
		return
	}
	if b.refs--; b.refs > 0 {
		return
	}
	b.at = time.Now()
	time.AfterFunc(time.Until(f.dropAt(b)), func() { f.dropBacking(n.ino, b) })
}

// dropBacking forgets b, the backing of ino, unless it is in use again;
// its file is deleted unless it is still a staging file being written or
// committed.
func (f *FS) dropBacking(ino chain.Ino, b *backing) {
	f.backingMu.Lock()
	if f.backings[ino] != b || b.refs > 0 || time.Now().Before(f.dropAt(b)) {
		f.backingMu.Unlock()
		return
	}
	delete(f.backings, ino)
	done := b.sf.State() == staging.Done
	f.backingMu.Unlock()
	if done {
		f.dropDone(b.sf)
	}
}

// dropDone deletes sf, a staging file kept only as a backing file (a
// save's after its commit, or a read copy): charged first if the host
// would have written its pages back by now.
func (f *FS) dropDone(sf *stagedFile) {
	f.chargeStagedIfDue(sf)
	f.stagedDone(sf)
	sf.remove()
}

// dropBackings deletes the staging files kept only as the kernel's backing
// files (done), once the server has stopped and the kernel holds none: an
// unmount within backingLinger of a save's close left that file's staging
// copy on the host until the store's next open.
func (f *FS) dropBackings() {
	f.backingMu.Lock()
	var done []*stagedFile
	for ino, b := range f.backings {
		if b.sf.State() == staging.Done {
			done = append(done, b.sf)
		}
		delete(f.backings, ino)
	}
	f.backingMu.Unlock()
	for _, sf := range done {
		f.dropDone(sf)
	}
}

// retire ends sf's life as ino's staging file: deleted, unless the kernel
// may still use it as the inode's backing file (then it is kept, marked
// done, until dropBacking).
//
// Kept, its pages stay in the write-back model (wear.go): readers may hold
// it open as their backing past the dirty expiry, when the host writes it.
func (f *FS) retire(ino chain.Ino, sf *stagedFile) {
	f.backingMu.Lock()
	b := f.backings[ino]
	kept := b != nil && b.sf == sf
	if kept {
		if err := sf.Mark(staging.Done); err != nil {
			logrus.WithError(err).Warn("staging file")
		}
	}
	f.backingMu.Unlock()
	if !kept {
		f.stagedDone(sf)
		sf.remove()
	}
}

// stagedMtime is the modification time a commit of sf records.
func stagedMtime(sf *stagedFile) int64 {
	_, mtime, _ := sf.attr()
	return mtime
}

// commitStaged encodes the staging file as the inode's content now (fsync,
// or close with SyncClose). The staging file stays: the handles open may
// write on. Call with of.mu held.
func (n *Node) commitStaged(of *openFile) syscall.Errno {
	of.waitCommit()
	if err := of.save.TakeFailure(); err != nil {
		return toErrno(err)
	}
	if of.stage == nil || !of.save.IsChanged() {
		return 0
	}
	return n.commitNow(of)
}

// commitNow commits of's staging file as the inode's content. Call with
// of.mu held.
func (n *Node) commitNow(of *openFile) syscall.Errno { return n.commitPrefix(of, 0) }

// commitPrefix commits the first limit bytes of of's staging file as the
// inode's content (limit 0: all of it); the bytes after them stay to be
// committed at the last close. Call with of.mu held.
func (n *Node) commitPrefix(of *openFile, limit int64) syscall.Errno {
	sf := of.stage
	if err := n.fsys.commitFileNow(n.ino, n.path(), sf, limit); err != nil {
		return toErrno(err)
	}
	size, _, _ := sf.attr()
	partial := limit > 0 && limit < size
	sf.committed = !partial
	if in, err := n.fsys.names.Inode(n.ino); err == nil {
		sf.appendFrom = in.Size // what is appended from now on
	} else {
		sf.appendOnly = false
	}
	if sf.State() == staging.Appending {
		// The save it kept is committed (with what was appended to it
		// since, unless limit left that out): a crash now keeps the
		// committed content.
		if err := sf.Mark(staging.Open); err != nil {
			return toErrno(err)
		}
	}
	// Passthrough handles may write on without telling us.
	of.save.CommittedNow(of.passthrough > 0 || partial)
	if of.passthrough > 0 {
		n.fsys.markStale(n.ino)
	}
	return 0
}

// appended is how many of sf's first bytes are the inode's committed
// content unchanged, writers having only appended to it, or -1. Call with
// the file's of.mu held.
func (sf *stagedFile) appended() int64 {
	if !sf.appendOnly {
		return -1
	}
	return sf.appendFrom
}

// commitFileNow commits sf as inode ino's content at once (fsync, a save
// waiting for room). Call with the file's of.mu held.
func (f *FS) commitFileNow(ino chain.Ino, path string, sf *stagedFile, limit int64) error {
	fc, err := f.store.BeginCommitFile(ino, path)
	if err != nil {
		return err
	}
	if appended := sf.appended(); appended >= 0 {
		fc.Appended(appended)
	}
	if limit > 0 {
		fc.Limit(limit)
	}
	mtime := stagedMtime(sf)
	err = sf.use(func(file *os.File) error { return fc.Run(file, path, mtime) })
	if err == errGone {
		fc.Abort()
	}
	return err
}

// stagedFiles adds (d 1) or removes (d -1) sf from the files staged
// (being written, or waiting for their commit); content held for the saves
// among them (holdForStaged) is let go once they are all gone.
func (f *FS) stagedFiles(sf *stagedFile, d int) {
	var release []func()
	f.heldMu.Lock()
	if d > 0 {
		f.live[sf] = true
	} else {
		delete(f.live, sf)
		kept := f.held[:0]
		for _, h := range f.held {
			delete(h.waiting, sf)
			if len(h.waiting) == 0 {
				release = append(release, h.release)
			} else {
				kept = append(kept, h)
			}
		}
		f.held = kept
	}
	f.heldMu.Unlock()
	for _, r := range release {
		r()
	}
}

// contentHold is content kept for staged saves that may be coded against
// it.
type contentHold struct {
	release func()
	waiting map[*stagedFile]bool
}

// holdForStaged keeps the content of inode ino, whose name victim is about
// to be unlinked or replaced by a rename, while saves of its family are
// staged (and also, the save renamed over it): one of them may choose it as
// its reference when it is encoded (the previous checkpoint the Hugging
// Face Trainer deletes right after saving the next; the live file the
// atomic-save idiom renames its new save over). It is freed once those
// saves are committed, where a plain filesystem frees it at once. Files of
// other families (a log kept open for the whole training) hold nothing.
func (f *FS) holdForStaged(ino chain.Ino, victim string, also *stagedFile) {
	family := chain.FamilyOf(victim)
	f.heldMu.Lock()
	live := make([]*stagedFile, 0, len(f.live))
	for sf := range f.live {
		live = append(live, sf)
	}
	f.heldMu.Unlock()
	waiting := map[*stagedFile]bool{}
	for _, sf := range live { // paths outside heldMu: they take go-fuse's locks
		if sf == also || chain.FamilyOf(sf.path()) == family {
			waiting[sf] = true
		}
	}
	if len(waiting) == 0 {
		return
	}
	release, err := f.store.HoldContent(ino)
	if err != nil || release == nil {
		return
	}
	f.heldMu.Lock()
	for sf := range waiting {
		if !f.live[sf] {
			delete(waiting, sf)
		}
	}
	if len(waiting) == 0 {
		f.heldMu.Unlock()
		release()
		return
	}
	f.held = append(f.held, &contentHold{release: release, waiting: waiting})
	f.heldMu.Unlock()
}

// unchangedSinceCommit reports whether sf, whose content was committed
// (fsync) while passthrough handles could still write it unseen, still holds
// exactly the committed content: its release then commits nothing (a
// torch.distributed.checkpoint save fsyncs each file before closing it).
func (n *Node) unchangedSinceCommit(sf *stagedFile) bool {
	info, err := n.fsys.store.Info(n.ino)
	if err != nil {
		return false
	}
	size, crc, err := int64(0), uint32(0), error(nil)
	err = sf.use(func(f *os.File) error {
		size, crc, err = checksumFile(f)
		return err
	})
	if err != nil {
		return false
	}
	if info == nil {
		return size == 0
	}
	return size == info.Size && crc == info.Checksum
}

// checksumFile is the size and CRC-32C of f's content, its holes skipped.
func checksumFile(f *os.File) (int64, uint32, error) { return chain.FileChecksum(f) }

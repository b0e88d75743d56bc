package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/staging"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// handle is an open file description.
type handle struct {
	n     *Node
	of    *openFile
	flags uint32
	// pt: the kernel serves this handle from sf, the inode's backing file
	// (stagingfile.go); its reads and writes do not reach us.
	pt bool
	sf *stagedFile
	// flushed: a close of the handle (a writer's) came, its release may
	// not have yet (save.State.ClosedWriters). Under of.mu.
	flushed bool
	// copyAtime is, for a reader served from a copy of the committed
	// content (readcopy.go), the copy's access time at the open (0: none).
	copyAtime int64
}

// ptHandle is a passthrough handle: go-fuse registers its backing file.
type ptHandle struct{ *handle }

var _ gofs.FilePassthroughFder = ptHandle{}

// PassthroughFd is the staging file the kernel serves the handle from.
func (h ptHandle) PassthroughFd() (int, bool) { return int(h.sf.Fd()), true }

// fileHandle is what go-fuse is handed: only passthrough handles offer a
// backing file.
func (h *handle) fileHandle() gofs.FileHandle {
	if h.pt {
		return ptHandle{h}
	}
	return h
}

var (
	_ gofs.FileReader    = (*handle)(nil)
	_ gofs.FileWriter    = (*handle)(nil)
	_ gofs.FileFlusher   = (*handle)(nil)
	_ gofs.FileFsyncer   = (*handle)(nil)
	_ gofs.FileReleaser  = (*handle)(nil)
	_ gofs.FileLseeker   = (*handle)(nil)
	_ gofs.FileAllocater = (*handle)(nil)
	_ gofs.FileGetattrer = (*handle)(nil)
)

func nowNano() int64 { return time.Now().UnixNano() }

// staged returns the inode's staging file, or nil when the committed
// content is the file's.
func (h *handle) staged() *stagedFile {
	h.of.mu.Lock()
	defer h.of.mu.Unlock()
	return h.of.stage
}

// Read serves the staged content if the file is being written or
// committed, else the committed version (rebuilt chunk by chunk, with
// read-ahead).
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.pt {
		h.n.fsys.passthroughRefused()
	}
	if h.of.atimeCheckDue(nowNano()) {
		h.n.accessed() // the kernel updates no atime of a FUSE file
	}
	for {
		if sf := h.staged(); sf != nil {
			var n int
			err := sf.use(func(f *os.File) error {
				var err error
				n, err = f.ReadAt(dest, off)
				return err
			})
			if err == errGone {
				continue // committed meanwhile
			}
			if err != nil && err != io.EOF {
				return nil, toErrno(err)
			}
			return fuse.ReadResultData(dest[:n]), 0
		}
		break
	}
	// A version replaced by a newer commit after the reader opened it
	// may be freed under it: the file's content is the newer version
	// then, so read that (a few times at most, as commits keep landing).
	for tries := 0; ; tries++ {
		r, errno := h.committedReader()
		if errno != 0 {
			return nil, errno
		}
		n, err := r.ReadAt(dest, off)
		if errors.Is(err, chain.ErrNotFound) && tries < 3 {
			h.dropReader(r)
			continue
		}
		if err != nil && err != io.EOF {
			logrus.WithError(err).Errorf("read %s at %d", h.n.path(), off)
			return nil, toErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
}

// committedReader is the handle's reader of the inode's committed
// version: the one the inode's handles share, unless a commit has changed
// the version since it was opened (a reader kept across a rewrite served
// the old version, still in the store as the new one's reference).
func (h *handle) committedReader() (*chain.Reader, syscall.Errno) {
	of := h.of
	of.mu.Lock()
	defer of.mu.Unlock()
	return h.n.currentReader(of)
}

// currentReader returns of.reader, reopened on the inode's committed
// version if it reads another one. Call with of.mu held.
func (n *Node) currentReader(of *openFile) (*chain.Reader, syscall.Errno) {
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil {
		return nil, toErrno(err)
	}
	if of.reader == nil || of.reader.Version() != in.Version {
		r, err := n.fsys.store.OpenVersion(in.Version)
		if err != nil {
			return nil, toErrno(err)
		}
		of.reader = r
	}
	return of.reader, 0
}

// dropReader forgets r, whose version is gone, unless another request
// already replaced it.
func (h *handle) dropReader(r *chain.Reader) {
	h.of.mu.Lock()
	if h.of.reader == r {
		h.of.reader = nil
	}
	h.of.mu.Unlock()
}

// touch notes a change of the staged content by a request, and returns the
// staging file. The file counts as open (not closed) again. appendAt is
// the offset of an O_APPEND write (-1: the change is no append): it only
// adds bytes if it is at or past the closed save a writer that appends
// took over (decided under the same lock as the change); any other
// change of a staging file that holds a closed save as its first bytes (a
// writer that appends took it over) commits that save first, as a
// writer's open that does not append does: fallocate through an O_APPEND
// handle once zeroed bytes of a closed save, and a SIGKILL then lost it.
func (h *handle) touch(appendAt int64) (*stagedFile, syscall.Errno) {
	if h.pt {
		h.n.fsys.passthroughRefused()
	}
	of := h.of
	of.mu.Lock()
	defer of.mu.Unlock()
	appending := appendAt >= 0 && appendAt >= of.keptPrefix()
	if sf := of.stage; sf != nil && !appending && sf.holdsClosedSave() {
		of.waitCommit()
		if errno := h.n.secureClosed(of); errno != 0 {
			return nil, errno
		}
	}
	sf := of.stage
	if sf == nil {
		return nil, syscall.EBADF
	}
	of.save.Change()
	sf.committed = false
	sf.noteReopened()
	if err := sf.markWriting(appending); err != nil {
		return nil, toErrno(err)
	}
	return sf, 0
}

// keptPrefix is how many first bytes of the staging file are a closed save
// that a writer which appends took over (0: none). Call with of.mu held.
func (of *openFile) keptPrefix() int64 {
	if sf := of.stage; sf != nil && sf.State() == staging.Appending {
		return sf.Keep()
	}
	return 0
}

// Write stores data at off (at the end for O_APPEND) in the staging file.
// A full host filesystem answers ENOSPC here, as a plain one would.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	appendAt := int64(-1)
	if h.flags&syscall.O_APPEND != 0 {
		appendAt = off
	}
	sf, errno := h.touch(appendAt)
	if errno != 0 {
		return 0, errno
	}
	if off+int64(len(data)) > maxFileSize {
		return 0, syscall.EFBIG
	}
	// off is where the kernel puts the bytes, at the end for an O_APPEND
	// write (it keeps the size: every write of the inode passes through
	// it). A handle's O_APPEND does not move it: the kernel also writes
	// back pages dirtied through a shared mapping through any writable
	// handle of the inode, at their own offsets, and moving them to the
	// end doubled a file (TestRandomOps).
	var n int
	fsys := h.n.fsys
	err := sf.use(func(f *os.File) error {
		if fsys.spaceLow() {
			st, err := f.Stat()
			if err != nil {
				return err
			}
			// The file stored raw, in whole pages, and the pack's last one.
			ps := int64(fsys.store.Statfs().PageSize)
			end := off + int64(len(data))
			if need := (end+ps-1)/ps*ps + ps; end > st.Size() && need > fsys.deviceAvail() {
				return fmt.Errorf("write of %s to %d: %d bytes free on the device: %w", h.n.path(), end, fsys.deviceAvail(), chain.ErrNoSpace)
			}
		}
		var err error
		n, err = f.WriteAt(data, off)
		return err
	})
	return uint32(n), toErrno(err)
}

// Flush runs at every close(2). When the inode's only writer closes, its
// staging file is marked closed: from then on a crash of the daemon keeps
// it (the next open of the store ingests it), as a plain filesystem keeps
// a file closed before its writer was killed. With SyncClose, or when the
// simulated device may not hold the file (spaceTight), the commit runs
// before close returns, which then reports its failure (ENOSPC), and the
// file keeps its previous content.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !writable(h.flags) {
		h.noteCopyRead() // before close returns, as a read's atime is
		return 0
	}
	if h.pt {
		// Writes through a mapping moved the staging file's times within
		// the jiffy the kernel caches a staged file's attributes: drop
		// them, so that stat after close sees them (fstests generic/080).
		h.n.NotifyContent(-1, 0)
	}
	of := h.of
	of.mu.Lock()
	defer of.mu.Unlock()
	if !h.flushed {
		h.flushed = true
		of.save.WriterClosed()
	}
	// The file is closed once every writer handle was: those closed before
	// whose release has not come count as closed too (a writer that
	// reopened the file meanwhile, then closed it).
	only := h.n.fsys.open.writers(of) <= of.save.ClosedWriters()
	if err := of.save.TakeFailure(); err != nil {
		return toErrno(err)
	}
	if !only && of.stage != nil && h.flags&syscall.O_APPEND != 0 && of.stage.State() == staging.Appending {
		// What it appended is closed, though another handle is open
		// (its release has not come, or another writer appends): a crash
		// keeps it.
		return toErrno(of.stage.keepClosed())
	}
	if !only || of.stage == nil || !of.save.IsChanged() {
		return 0
	}
	if h.n.fsys.SyncClose || h.n.fsys.spaceTight(of.stage) {
		errno := h.n.commitStaged(of)
		if errno != 0 {
			of.save.Unchanged() // reported: the previous content stays
			// The kernel's cached size and pages are the rejected save's.
			h.n.fsys.markStale(h.n.ino)
			go h.n.NotifyContent(0, 0) // not from inside this request: it may wait on it
		}
		return errno
	}
	h.n.beginCommit(of)
	of.stage.noteClosed()
	return toErrno(of.stage.Mark(staging.Closed))
}

// spaceTight reports whether the simulated device might not hold sf's
// content stored as it is, with what the commits under way may take.
func (f *FS) spaceTight(sf *stagedFile) bool {
	size, _, ok := sf.attr()
	if !ok {
		return false
	}
	return size+size/8+(1<<20) > f.deviceAvail()
}

// deviceAvail is the simulated device's free bytes less what the closed
// saves waiting for their commits may take.
func (f *FS) deviceAvail() int64 {
	_, free := f.store.SpaceBytes()
	return free - f.stagedBytes.Load()
}

// spaceLow reports whether the simulated device is close enough to full
// that writes must be seen to be refused: under a sixteenth of it free, at
// most 1 GiB. A new writer is then served by the daemon, not through
// passthrough, and a write that grows its file past what the device still
// holds fails with ENOSPC, as on a full plain filesystem, instead of
// succeeding into the staging file and failing only at close, which a
// shell never checks (sh -c 'echo data > f' exited 0 and left f empty).
func (f *FS) spaceLow() bool {
	total, _ := f.store.SpaceBytes()
	return f.deviceAvail() < min(total/16, 1<<30)
}

// Fsync commits the staged content and makes the store durable: the save
// is then on the device encoded, and its staging file need not be synced
// (nor charged to the device) as well.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	of := h.of
	of.mu.Lock()
	errno := h.n.commitStaged(of)
	of.mu.Unlock()
	if errno != 0 {
		return errno
	}
	h.n.fsys.store.WriteBackShadow(h.n.ino) // a plain filesystem writes the file now
	return toErrno(h.n.fsys.store.SyncData())
}

// Release runs when the last descriptor of the handle is gone.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.noteCopyRead()                             // a mapping read after the close
	h.n.fsys.releases.afterRelease(ctx, func() { // releaseorder.go
		h.of.mu.Lock()
		h.n.dropMode(h.of, h.pt)
		h.of.mu.Unlock()
		h.n.release(h.of, writable(h.flags))
		if h.flushed { // after the release started the commit, for Drain
			h.of.mu.Lock()
			h.of.save.WriterReleased()
			h.of.mu.Unlock()
		}
	})
	return 0
}

// noteCopyRead moves the file's access time if the host's kernel saw a
// read of the copy the handle is served from (readcopy.go).
func (h *handle) noteCopyRead() {
	if h.copyAtime != 0 && h.sf.atime() != h.copyAtime {
		h.n.accessed()
	}
}

// Getattr serves fstat.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, h, out)
}

// Lseek answers SEEK_DATA and SEEK_HOLE: from the staging file while the
// file is staged, else from the committed file's chunks of zeros (what a
// truncate declared and nobody wrote, and runs of zeros written), so `cp
// --sparse` of a sparse file out of the mount skips them.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	if whence != unix.SEEK_DATA && whence != unix.SEEK_HOLE {
		return 0, syscall.EINVAL
	}
	if int64(off) < 0 {
		return 0, syscall.ENXIO
	}
	if sf := h.staged(); sf != nil {
		var at int64
		err := sf.use(func(f *os.File) error {
			var err error
			at, err = unix.Seek(int(f.Fd()), int64(off), int(whence))
			return err
		})
		if err != errGone {
			return uint64(at), toErrno(err)
		}
	}
	of := h.of
	of.mu.Lock()
	of.waitCommit()
	r, errno := h.n.currentReader(of)
	of.mu.Unlock()
	if errno != 0 {
		return 0, errno
	}
	if int64(off) >= r.Size() {
		return 0, syscall.ENXIO
	}
	at, err := r.SeekExtent(int64(off), whence == unix.SEEK_DATA)
	if err != nil {
		return 0, toErrno(err)
	}
	if whence == unix.SEEK_DATA && at >= r.Size() {
		return 0, syscall.ENXIO
	}
	return uint64(at), 0
}

// Allocate is the host filesystem's fallocate on the staging file, every
// mode it supports (preallocation, KEEP_SIZE, punching holes, ...). What
// it allocates is reserved on the device first, so a fallocate beyond the
// free space df shows fails with ENOSPC and changes nothing (space.go).
// By a caller other than root it clears setuid and setgid bits as a write
// does (killPrivileges: a fallocate request carries no flag for it).
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if off+size > maxFileSize {
		return syscall.EFBIG
	}
	fsys, ino := h.n.fsys, h.n.ino
	sf := h.staged()
	if sf == nil {
		return syscall.EBADF
	}
	reserved, err := fsys.reserveFallocate(ino, sf, mode, int64(off), int64(size))
	if err != nil {
		return toErrno(err)
	}
	grown := int64(0)
	defer func() { fsys.settleFallocate(ino, reserved, grown) }()
	// The kernel sends fallocate of a passthrough handle here too (it
	// serves only reads, writes and mmap from the backing file): unlike a
	// write, it is no sign that passthrough was refused.
	plain := *h
	plain.pt = false
	sf, errno := plain.touch(-1) // it may change any bytes
	if errno != 0 {
		return errno
	}
	if errno := h.n.killPrivileges(ctx); errno != 0 {
		return errno
	}
	before, _ := allocatedBytes(sf)
	err = sf.use(func(f *os.File) error {
		return unix.Fallocate(int(f.Fd()), mode, int64(off), int64(size))
	})
	after, _ := allocatedBytes(sf)
	grown = after - before
	return toErrno(err)
}

// inGroup reports whether the caller is in group gid: its own (the FUSE
// request's) or one of its supplementary groups, which only the caller's
// /proc status tells. Where that cannot be read, not in it: the setgid bit
// is cleared rather than kept.
func inGroup(caller *fuse.Caller, gid uint32) bool {
	if caller.Gid == gid {
		return true
	}
	if caller.Pid == 0 {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(caller.Pid), 10) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if groups, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, g := range strings.Fields(groups) {
				if g == strconv.FormatUint(uint64(gid), 10) {
					return true
				}
			}
			return false
		}
	}
	return false
}

var _ gofs.NodeFsyncer = (*Node)(nil)

// Fsync serves fsync(2) on any node. The kernel sends it to the node first
// (and fsync of a directory only here), so a file's handle does the work;
// for a directory, whose changes are committed already, the store is made
// durable. Without it fsync of a directory failed with EOPNOTSUPP, which
// breaks writers that sync the directory after a rename.
func (n *Node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	switch h := f.(type) {
	case *handle:
		return h.Fsync(ctx, flags)
	case ptHandle:
		return h.Fsync(ctx, flags)
	}
	n.fsys.Drain() // the entries synced name content that must be there
	return toErrno(n.fsys.store.SyncData())
}

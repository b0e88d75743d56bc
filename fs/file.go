package fs

import (
	"context"
	"io"
	"syscall"
	"time"

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

// Read serves uncommitted bytes if the file is being written, else the
// committed version (rebuilt chunk by chunk, with read-ahead).
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	of := h.of
	of.mu.Lock()
	if of.writer != nil {
		n, err := of.writer.ReadAt(dest, off)
		of.mu.Unlock()
		if err != nil && err != io.EOF {
			return nil, toErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	if of.reader == nil {
		of.waitCommit()
	}
	if of.writer != nil { // a writer started while we waited
		n, err := of.writer.ReadAt(dest, off)
		of.mu.Unlock()
		if err != nil && err != io.EOF {
			return nil, toErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	if of.reader == nil {
		in, err := h.n.fsys.store.Inode(h.n.ino)
		if err == nil {
			of.reader, err = h.n.fsys.store.OpenVersion(in.Version)
		}
		if err != nil {
			of.mu.Unlock()
			return nil, toErrno(err)
		}
	}
	r := of.reader
	of.mu.Unlock()
	n, err := r.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		logrus.WithError(err).Errorf("read %s at %d", h.n.path(), off)
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write stores data at off (at the end for O_APPEND).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	of := h.of
	of.mu.Lock()
	defer of.mu.Unlock()
	w, errno := h.n.writer(of, false)
	if errno != 0 {
		return 0, errno
	}
	if h.flags&syscall.O_APPEND != 0 {
		off = w.Size()
	}
	n, err := w.WriteAt(data, off, nowNano())
	of.noteSize()
	if err != nil {
		return uint32(n), toErrno(err)
	}
	return uint32(n), 0
}

// Flush runs at every close(2): a handle that may write commits the file,
// in the background unless SyncClose (writeback.go).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !writable(h.flags) {
		return 0
	}
	h.of.mu.Lock()
	defer h.of.mu.Unlock()
	return h.n.commitClose(h.of)
}

// Fsync commits the file and makes the store durable.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.of.mu.Lock()
	errno := h.n.commit(h.of)
	h.of.mu.Unlock()
	if errno != 0 {
		return errno
	}
	return toErrno(h.n.fsys.store.SyncData())
}

// Release runs when the last descriptor of the handle is gone.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.n.release(h.of, writable(h.flags))
	return 0
}

// Getattr serves fstat.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, h, out)
}

func (h *handle) size() (int64, syscall.Errno) {
	if s := h.of.size.Load(); s >= 0 {
		return s, 0
	}
	in, err := h.n.fsys.store.Inode(h.n.ino)
	if err != nil {
		return 0, toErrno(err)
	}
	return in.Size, 0
}

// Lseek answers SEEK_DATA and SEEK_HOLE. A committed file's holes are its
// chunks of zeros (what a truncate declared and nobody wrote, and runs of
// zeros written), so `cp --sparse` of a sparse file out of the mount skips
// them; a file being written has no hole but its end.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	if whence != unix.SEEK_DATA && whence != unix.SEEK_HOLE {
		return 0, syscall.EINVAL
	}
	size, errno := h.size()
	if errno != 0 {
		return 0, errno
	}
	if int64(off) >= size {
		return 0, syscall.ENXIO
	}
	of := h.of
	of.mu.Lock()
	if of.writer == nil {
		of.waitCommit()
	}
	if of.writer != nil {
		of.mu.Unlock()
		if whence == unix.SEEK_DATA {
			return off, 0
		}
		return uint64(size), 0
	}
	r := of.reader
	if r == nil {
		in, err := h.n.fsys.store.Inode(h.n.ino)
		if err == nil {
			r, err = h.n.fsys.store.OpenVersion(in.Version)
		}
		if err != nil {
			of.mu.Unlock()
			return 0, toErrno(err)
		}
		of.reader = r
	}
	of.mu.Unlock()
	at, err := r.SeekExtent(int64(off), whence == unix.SEEK_DATA)
	if err != nil {
		return 0, toErrno(err)
	}
	if whence == unix.SEEK_DATA && at >= r.Size() {
		return 0, syscall.ENXIO
	}
	return uint64(at), 0
}

// Allocate supports plain preallocation (which extends the size with
// zeros), KEEP_SIZE (nothing to reserve: pages are allocated when written)
// and punching holes (zeros written).
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	h.of.mu.Lock()
	defer h.of.mu.Unlock()
	defer h.of.noteSize()
	switch mode {
	case 0:
		w, errno := h.n.writer(h.of, false)
		if errno != 0 {
			return errno
		}
		if end := int64(off + size); end > w.Size() {
			return toErrno(w.Truncate(end, nowNano()))
		}
		return 0
	case unix.FALLOC_FL_KEEP_SIZE:
		return 0
	case unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE:
		w, errno := h.n.writer(h.of, false)
		if errno != 0 {
			return errno
		}
		end := min(int64(off+size), w.Size())
		zeros := make([]byte, 1<<20)
		for o := int64(off); o < end; {
			n := min(int64(len(zeros)), end-o)
			if _, err := w.WriteAt(zeros[:n], o, nowNano()); err != nil {
				return toErrno(err)
			}
			o += n
		}
		return 0
	}
	return syscall.EOPNOTSUPP
}

var _ gofs.NodeFsyncer = (*Node)(nil)

// Fsync serves fsync(2) on any node. The kernel sends it to the node first
// (and fsync of a directory only here), so a file's handle does the work;
// for a directory, whose changes are committed already, the store is made
// durable. Without it fsync of a directory failed with EOPNOTSUPP, which
// breaks writers that sync the directory after a rename.
func (n *Node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	n.fsys.commits.wait() // the entries synced name content that must be there
	return toErrno(n.fsys.store.SyncData())
}

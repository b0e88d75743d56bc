package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
)

// FS is one mounted ckptfs: the store and the state of its open files.
type FS struct {
	store Store
	open  *openTable
	// Stats renders .ckptfs/stats.json; set by the mount command.
	Stats   func() ([]byte, error)
	started time.Time // the control directory's times

	staleMu sync.Mutex
	stale   map[chain.Ino]bool // a commit failed: cached pages may be wrong

	storedMu sync.Mutex
	stored   map[chain.VersionID]int64 // encoded bytes of committed versions (fillAttr)

	// SyncClose commits at close before close returns (--sync-close);
	// otherwise the commit runs in the background (writeback.go).
	SyncClose bool
	commits   commitTracker
}

// markStale notes that the kernel's cached pages of ino may hold bytes
// that were never committed.
func (f *FS) markStale(ino chain.Ino) {
	f.staleMu.Lock()
	f.stale[ino] = true
	f.staleMu.Unlock()
}

// takeStale reports, once, whether ino's cached pages must be dropped.
func (f *FS) takeStale(ino chain.Ino) bool {
	f.staleMu.Lock()
	defer f.staleMu.Unlock()
	s := f.stale[ino]
	delete(f.stale, ino)
	return s
}

// New returns the filesystem for a store; Root is its root node.
func New(store Store) *FS {
	return &FS{store: store, open: newOpenTable(), started: time.Now(), stale: map[chain.Ino]bool{}}
}

// Root returns the root directory node to mount.
func (f *FS) Root() gofs.InodeEmbedder { return &Node{fsys: f, ino: chain.RootIno} }

// Node is a file, directory or symlink of the store.
type Node struct {
	gofs.Inode
	fsys *FS
	ino  chain.Ino
}

var (
	_ gofs.NodeOnForgetter = (*Node)(nil)
	_ gofs.NodeGetattrer   = (*Node)(nil)
	_ gofs.NodeSetattrer   = (*Node)(nil)
	_ gofs.NodeStatfser    = (*Node)(nil)
)

// toErrno maps store errors to what the kernel understands. Anything
// unexpected is logged with its context and reported as EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, chain.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, chain.ErrChecksum):
		logrus.WithError(err).Error("corrupt data")
		return syscall.EIO
	}
	logrus.WithError(err).Error("i/o error")
	return syscall.EIO
}

// OnForget runs when the kernel drops its last reference to the node.
func (n *Node) OnForget() {
	if n.fsys.open.forget(n.ino) {
		n.fsys.forget(n.ino)
	}
}

// forget frees ino if it has no names left (an orphan); otherwise nothing.
func (f *FS) forget(ino chain.Ino) {
	if err := f.store.Forget(ino); err != nil {
		toErrno(err)
	}
}

// path is the node's path below the root, which names its family.
func (n *Node) path() string { return n.Path(nil) }

func (n *Node) child(ctx context.Context, in *chain.Inode, out *fuse.EntryOut) *gofs.Inode {
	n.fsys.fillAttr(in, &out.Attr)
	n.fsys.open.remember(in.Ino)
	node := &Node{fsys: n.fsys, ino: in.Ino}
	return n.NewInode(ctx, node, gofs.StableAttr{Mode: in.Mode & syscall.S_IFMT, Ino: uint64(in.Ino)})
}

// fillAttr converts an inode; an open writer's size wins over the
// committed one. Blocks (what du and ls -s show) count the bytes the store
// keeps for the committed version, so du of a mount shows what the
// checkpoints cost on flash; while a writer is open, the logical size.
func (f *FS) fillAttr(in *chain.Inode, out *fuse.Attr) {
	size, mtime := in.Size, in.Mtime
	writing := false
	if of := f.open.get(in.Ino); of != nil {
		if s := of.size.Load(); s >= 0 {
			size, writing = s, true
			if m := of.mtime.Load(); m != 0 {
				mtime = m
			}
		}
	}
	allocated := size
	if !writing && in.Version != 0 {
		if stored, ok := f.storedBytes(in); ok {
			allocated = stored
		}
	}
	out.Ino = uint64(in.Ino)
	out.Mode = in.Mode
	out.Nlink = in.Nlink
	out.Owner = fuse.Owner{Uid: in.Uid, Gid: in.Gid}
	out.Rdev = in.Rdev
	out.Size = uint64(size)
	out.Blksize = 4096
	out.Blocks = (uint64(allocated) + 511) / 512
	at, mt, ct := time.Unix(0, in.Atime), time.Unix(0, mtime), time.Unix(0, in.Ctime)
	out.SetTimes(&at, &mt, &ct)
}

// storedBytes is the encoded size of in's committed version. A version
// never changes, so the size is read once (Store.Info, a metadata read
// transaction) and kept by version ID; getattr of a file seen before costs
// a map lookup. The map is dropped when it grows past storedCacheMax.
func (f *FS) storedBytes(in *chain.Inode) (int64, bool) {
	f.storedMu.Lock()
	n, ok := f.stored[in.Version]
	f.storedMu.Unlock()
	if ok {
		return n, true
	}
	info, err := f.store.Info(in.Ino)
	if err != nil || info == nil || info.Version != in.Version {
		return 0, false // gone or replaced meanwhile: the caller uses the size
	}
	f.storedMu.Lock()
	if f.stored == nil || len(f.stored) >= storedCacheMax {
		f.stored = map[chain.VersionID]int64{}
	}
	f.stored[in.Version] = info.StoredBytes
	f.storedMu.Unlock()
	return info.StoredBytes, true
}

const storedCacheMax = 1 << 16

// Getattr reports the inode's attributes.
func (n *Node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fsys.waitSmallCommit(n.ino)
	in, err := n.fsys.store.Inode(n.ino)
	if err != nil {
		return toErrno(err)
	}
	n.fsys.fillAttr(in, &out.Attr)
	return 0
}

// Setattr changes size, mode, owner and times.
func (n *Node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	// A commit landing after this would undo its times (cp -p sets them
	// after close).
	n.waitCommitOf()
	now := time.Now().UnixNano()
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(int64(size), now); errno != 0 {
			return errno
		}
	}
	mode, hasMode := in.GetMode()
	uid, hasUid := in.GetUID()
	gid, hasGid := in.GetGID()
	atime, hasAtime := in.GetATime()
	mtime, hasMtime := in.GetMTime()
	if hasMtime {
		if of := n.fsys.open.get(n.ino); of != nil {
			of.mu.Lock()
			if of.writer != nil {
				of.writer.SetMtime(mtime.UnixNano())
			}
			of.mu.Unlock()
		}
	}
	if hasMode || hasUid || hasGid || hasAtime || hasMtime {
		_, err := n.fsys.store.SetAttr(n.ino, func(ino *chain.Inode) error {
			if hasMode {
				ino.Mode = ino.Mode&syscall.S_IFMT | mode&^syscall.S_IFMT
			}
			if hasUid {
				ino.Uid = uid
			}
			if hasGid {
				ino.Gid = gid
			}
			if hasAtime {
				ino.Atime = atime.UnixNano()
			}
			if hasMtime {
				ino.Mtime = mtime.UnixNano()
			}
			return nil
		})
		if err != nil {
			return toErrno(err)
		}
	}
	return n.Getattr(ctx, fh, out)
}

// truncate sets the file size: through the uncommitted writer if the file
// has one (it commits with the writes), else as a change committed at once,
// as truncate(2) is on any filesystem. A file open for writing starts its
// writer here instead: a truncate is how the kernel delivers O_TRUNC, and
// how safetensors sizes the file it is about to fill, and the writes that
// follow belong to the same new content; committing an empty or zero-filled
// version first would drop the file's previous content (the reference the
// rewrite should be coded against) and store the zeros for nothing.
func (n *Node) truncate(size, now int64) syscall.Errno {
	if n.StableAttr().Mode != syscall.S_IFREG {
		return syscall.EINVAL
	}
	if of := n.fsys.open.get(n.ino); of != nil {
		of.mu.Lock()
		defer of.mu.Unlock()
		of.waitCommit()
		if of.writer == nil && n.fsys.open.writableOpen(n.ino) {
			if _, errno := n.writer(of, size == 0); errno != 0 {
				return errno
			}
		}
		if of.writer != nil {
			defer of.noteSize()
			return toErrno(of.writer.Truncate(size, now))
		}
		of.reader = nil // the committed version is about to change
	}
	w, err := n.fsys.store.NewWriter(n.ino, n.path, size == 0)
	if err != nil {
		return toErrno(err)
	}
	if err := w.Truncate(size, now); err != nil {
		w.Abort()
		return toErrno(err)
	}
	return toErrno(w.Commit())
}

// Statfs reports the device's logical capacity and free space.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st := n.fsys.store.Statfs()
	out.Bsize = uint32(st.PageSize)
	out.Frsize = uint32(st.PageSize)
	out.Blocks = uint64(st.Pages)
	out.Bfree = uint64(st.FreePages)
	out.Bavail = uint64(st.FreePages)
	out.Files = st.Inodes + 1<<20
	out.Ffree = 1 << 20
	out.NameLen = chain.MaxNameLen
	return 0
}

package fs

import (
	"context"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var (
	_ gofs.NodeOpener   = (*Node)(nil)
	_ gofs.NodeCreater  = (*Node)(nil)
	_ gofs.NodeTmpfiler = (*Node)(nil)
)

func writable(flags uint32) bool {
	return flags&syscall.O_ACCMODE == syscall.O_WRONLY || flags&syscall.O_ACCMODE == syscall.O_RDWR
}

// Open opens a regular file. A handle that may write gets the inode's
// staging file (stagingfile.go), empty with O_TRUNC (the mount asks the kernel
// to pass O_TRUNC with the open), else holding the committed content.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		if errno := n.killPrivileges(ctx); errno != 0 {
			return nil, 0, errno
		}
	}
	h, errno := n.openHandle(flags, false)
	if errno != 0 {
		return nil, 0, errno
	}
	if h.pt && writable(flags) {
		// The kernel writes the staging file itself, through mmap too,
		// moving its times behind the attributes it cached at lookup (a
		// second's worth): drop them, so that stat asks, and a staged file's
		// are not cached (fstests generic/080, 215). Attributes only: no
		// page locks, so it may be sent from inside the open.
		n.NotifyContent(-1, 0)
	}
	var fuseFlags uint32
	if !writable(flags) && !h.pt && !n.fsys.takeStale(n.ino) {
		// Content only changes through this mount, so the kernel's cached
		// pages stay valid across opens, unless they may be wrong since
		// (a commit failed, or passthrough wrote around them): then this
		// open drops them.
		fuseFlags = fuse.FOPEN_KEEP_CACHE
	}
	return h.fileHandle(), fuseFlags, 0
}

// openHandle opens a handle of n: staged if it may write (fresh marks a
// file just created, whose content is empty), in the I/O mode the inode's
// open handles allow.
func (n *Node) openHandle(flags uint32, fresh bool) (*handle, syscall.Errno) {
	of := n.fsys.open.acquire(n.ino)
	h := &handle{n: n, of: of, flags: flags}
	w := writable(flags)
	if w {
		n.fsys.open.addWritable(of)
	}
	of.mu.Lock()
	if w {
		if errno := n.stageForWrite(of, fresh || flags&syscall.O_TRUNC != 0, flags&syscall.O_APPEND != 0, flags&syscall.O_ACCMODE == syscall.O_RDWR); errno != 0 {
			of.mu.Unlock()
			n.release(of, true)
			return nil, errno
		}
		if fresh {
			of.save.Unchanged() // an empty file is what the inode holds already
		}
	}
	direct := flags&syscall.O_DIRECT != 0
	if !w && !direct {
		n.prepareReadCopy(of)
	}
	h.sf, h.pt = n.chooseMode(of, w, direct)
	if h.pt && !w && h.sf.committed {
		if n.atimeStale(time.Now().UnixNano()) {
			h.sf.ageAtime() // so that the host's kernel moves it at a read
		}
		h.copyAtime = h.sf.atime()
		n.fsys.readCopies.readers.Add(1)
	}
	of.mu.Unlock()
	return h, 0
}

// Create makes and opens a new regular file.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	child, errno := n.create(ctx, name, chain.NewNode{Mode: syscall.S_IFREG | mode&07777}, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := child.Operations().(*Node).openHandle(flags, true)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, h.fileHandle(), 0, 0
}

// Tmpfile makes and opens a regular file with no name (O_TMPFILE).
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	nn := chain.NewNode{Mode: syscall.S_IFREG | mode&07777}
	if caller, ok := fuse.FromContext(ctx); ok {
		nn.Uid, nn.Gid = caller.Uid, caller.Gid
	}
	in, err := n.fsys.names.CreateUnnamed(n.ino, nn)
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	n.fsys.fillAttr(in, &out.Attr)
	n.fsys.open.remember(in.Ino)
	child := n.NewInode(ctx, &Node{fsys: n.fsys, ino: in.Ino}, stableAttr(in))
	h, errno := child.Operations().(*Node).openHandle(flags, true)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, h.fileHandle(), 0, 0
}

// release drops a handle. The release of the inode's last writer commits
// its staging file in the background; an unlinked inode the kernel has also
// forgotten is freed.
func (n *Node) release(of *openFile, writable bool) {
	if n.fsys.open.release(n.ino, of, writable, n.startCommit) {
		n.fsys.forget(n.ino)
	}
}

// killPrivileges applies setidCleared, and drops security.capability,
// when a caller other than root changes the file: opens it for writing,
// truncates it, fallocates. The mount handles that itself
// (HANDLE_KILLPRIV_V2): otherwise the kernel asks for security.capability
// before every write(2), a round trip to the daemon that passthrough
// writes would pay too. A plain kernel clears them at the first write; here
// it is at the open, which a write follows. A changed mode is announced to
// the kernel, which keeps the mode it cached otherwise (stat -c %a asks for
// nothing else).
func (n *Node) killPrivileges(ctx context.Context) syscall.Errno {
	caller, ok := fuse.FromContext(ctx)
	if !ok || caller.Uid == 0 {
		return 0
	}
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil {
		return toErrno(err)
	}
	// The group test may read the caller's /proc status: not inside the
	// transaction, and only for a file with setgid.
	if mode := setidCleared(in.Mode, caller, in.Gid); mode != in.Mode {
		gid := in.Gid
		_, err = n.fsys.names.SetAttr(n.ino, func(ino *chain.Inode) error {
			if ino.Gid == gid {
				ino.Mode = setidCleared(ino.Mode, caller, gid)
			} else { // chowned meanwhile: no /proc read in here
				ino.Mode = setidCleared(ino.Mode, nil, ino.Gid) &^ syscall.S_ISGID
			}
			return nil
		})
		if err != nil {
			return toErrno(err)
		}
		// Attributes only (offset -1): no page locks, so it may be sent
		// from inside the request.
		n.NotifyContent(-1, 0)
	}
	if _, has := n.fsys.names.Xattr(n.ino, "security.capability"); has {
		return toErrno(n.fsys.names.RemoveXattr(n.ino, "security.capability"))
	}
	return 0
}

package fs

import (
	"context"
	"syscall"

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

// Open opens a regular file. O_TRUNC starts the content afresh, so the
// writes that follow stream into an ingest.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	of := n.fsys.open.acquire(n.ino)
	h := &handle{n: n, of: of, flags: flags}
	if writable(flags) {
		n.fsys.open.addWritable(of)
	}
	if writable(flags) && flags&syscall.O_TRUNC != 0 {
		of.mu.Lock()
		errno := n.truncateOpen(of)
		of.mu.Unlock()
		if errno != 0 {
			n.release(of, true)
			return nil, 0, errno
		}
	}
	var fuseFlags uint32
	if !writable(flags) && !n.fsys.takeStale(n.ino) {
		// Content only changes through this mount, so the kernel's cached
		// pages stay valid across opens, unless a commit failed since:
		// then they may hold the rejected bytes, and this open drops them.
		fuseFlags = fuse.FOPEN_KEEP_CACHE
	}
	return h, fuseFlags, 0
}

// truncateOpen empties an open file: a fresh streaming writer, unless
// one exists already (then it is truncated). Call with of.mu held.
func (n *Node) truncateOpen(of *openFile) syscall.Errno {
	if of.writer != nil {
		defer of.noteSize()
		return toErrno(of.writer.Truncate(0, nowNano()))
	}
	w, errno := n.writer(of, true)
	if errno != 0 {
		return errno
	}
	_ = w
	return 0
}

// Create makes and opens a new regular file.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	child, errno := n.create(ctx, name, chain.NewNode{Mode: syscall.S_IFREG | mode&07777}, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	cn := child.Operations().(*Node)
	of := n.fsys.open.acquire(cn.ino)
	if writable(flags) {
		n.fsys.open.addWritable(of)
	}
	return child, &handle{n: cn, of: of, flags: flags}, 0, 0
}

// Tmpfile makes and opens a regular file with no name (O_TMPFILE).
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	nn := chain.NewNode{Mode: syscall.S_IFREG | mode&07777}
	if caller, ok := fuse.FromContext(ctx); ok {
		nn.Uid, nn.Gid = caller.Uid, caller.Gid
	}
	in, err := n.fsys.store.CreateUnnamed(n.ino, nn)
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	n.fsys.fillAttr(in, &out.Attr)
	n.fsys.open.remember(in.Ino)
	child := n.NewInode(ctx, &Node{fsys: n.fsys, ino: in.Ino}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: uint64(in.Ino)})
	of := n.fsys.open.acquire(in.Ino)
	if writable(flags) {
		n.fsys.open.addWritable(of)
	}
	return child, &handle{n: child.Operations().(*Node), of: of, flags: flags}, 0, 0
}

// writer returns the inode's uncommitted writer, starting one if needed.
// Call with of.mu held.
func (n *Node) writer(of *openFile, truncate bool) (*chain.Writer, syscall.Errno) {
	of.waitCommit() // the new content starts from the committed one
	if of.writer != nil {
		return of.writer, 0
	}
	w, err := n.fsys.store.NewWriter(n.ino, n.path, truncate)
	if err != nil {
		return nil, toErrno(err)
	}
	of.writer = w
	of.reader = nil
	of.noteSize()
	return w, 0
}

// commit makes the inode's uncommitted writes its content, after the
// background commit of an earlier close; it reports that one's failure if
// nobody has yet. Call with of.mu held.
func (n *Node) commit(of *openFile) syscall.Errno {
	of.waitCommit()
	if err := of.failed; err != nil {
		of.failed = nil
		return toErrno(err)
	}
	if of.writer == nil {
		return 0
	}
	w := of.writer
	of.writer, of.reader = nil, nil
	// of.size keeps the writer's size while the commit encodes: the
	// inode's size changes only when the commit lands.
	defer of.size.Store(-1)
	if err := w.Commit(); err != nil {
		// The file keeps its previous content; the kernel's page cache may
		// still hold the bytes just rejected.
		n.fsys.markStale(n.ino)
		go n.NotifyContent(0, 0) // not from inside this request: it may wait on it
		return toErrno(err)
	}
	return 0
}

// release drops a handle. The inode's last handle commits what is left;
// an unlinked inode the kernel has also forgotten is freed.
func (n *Node) release(of *openFile, writable bool) {
	if n.fsys.open.release(n.ino, writable, func(of *openFile) { _ = n.commitClose(of) }) {
		n.fsys.forget(n.ino)
	}
}

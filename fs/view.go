package fs

import (
	"context"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The precision views (issue 51): .ckptfs/view/bf16/ mirrors the mount,
// read-only, and each file in it reads as its committed content with every
// float32 value cut to bfloat16 precision (the low 16 bits zeroed: rounded
// toward zero), in the same dtype and format, so loaders read it unchanged
// (chain/view.go). bf16-nearest/ and fp16/ round to the nearest bfloat16
// or float16 value instead. It is under .ckptfs so that no one takes it for the
// exact files. Only directories and regular files appear in it. A file
// being written shows its last committed content; an open waits for the
// commits of saves already closed.
const (
	viewDirName  = "view"
	viewBF16Name = "bf16"
	// viewInoBit marks a view node's inode number, and the two bits below
	// it its precision: the store's numbers stay far below them, and the
	// control nodes' sit above them.
	viewInoBit     = 1 << 62
	viewPrecShift  = 60
	controlViewIno = 1<<63 - 4
	viewAttrTime   = time.Second
)

func viewIno(ino chain.Ino, p chain.Precision) uint64 {
	return uint64(ino) | viewInoBit | uint64(p-chain.BF16)<<viewPrecShift
}

// viewTopNode is .ckptfs/view: one directory per precision.
type viewTopNode struct {
	gofs.Inode
	fsys *FS
}

var (
	_ gofs.NodeLookuper  = (*viewTopNode)(nil)
	_ gofs.NodeReaddirer = (*viewTopNode)(nil)
	_ gofs.NodeGetattrer = (*viewTopNode)(nil)
	_ gofs.NodeUnlinker  = (*viewTopNode)(nil)
	_ gofs.NodeRmdirer   = (*viewTopNode)(nil)
)

func (v *viewTopNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	v.fsys.controlAttr(&out.Attr, controlDirMode, controlViewIno)
	return 0
}

func (v *viewTopNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (v *viewTopNode) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }

func (v *viewTopNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	for _, p := range chain.Precisions {
		if name != p.String() {
			continue
		}
		in, err := v.fsys.names.Inode(chain.RootIno)
		if err != nil {
			return nil, toErrno(err)
		}
		return v.NewInode(ctx, v.fsys.viewChild(in, p, out), gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: viewIno(chain.RootIno, p), Gen: inodeGen}), 0
	}
	return nil, syscall.ENOENT
}

func (v *viewTopNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	list := []fuse.DirEntry{
		{Name: ".", Mode: syscall.S_IFDIR, Ino: controlViewIno},
		{Name: "..", Mode: syscall.S_IFDIR, Ino: controlDirIno},
	}
	for _, p := range chain.Precisions {
		list = append(list, fuse.DirEntry{Name: p.String(), Mode: syscall.S_IFDIR, Ino: viewIno(chain.RootIno, p)})
	}
	return gofs.NewListDirStream(list), 0
}

// viewNode is a directory or a regular file of the view.
type viewNode struct {
	gofs.Inode
	fsys *FS
	ino  chain.Ino
	prec chain.Precision
}

var (
	_ gofs.NodeLookuper    = (*viewNode)(nil)
	_ gofs.NodeReaddirer   = (*viewNode)(nil)
	_ gofs.NodeGetattrer   = (*viewNode)(nil)
	_ gofs.NodeOpener      = (*viewNode)(nil)
	_ gofs.NodeSetattrer   = (*viewNode)(nil)
	_ gofs.NodeCreater     = (*viewNode)(nil)
	_ gofs.NodeMkdirer     = (*viewNode)(nil)
	_ gofs.NodeMknoder     = (*viewNode)(nil)
	_ gofs.NodeSymlinker   = (*viewNode)(nil)
	_ gofs.NodeLinker      = (*viewNode)(nil)
	_ gofs.NodeUnlinker    = (*viewNode)(nil)
	_ gofs.NodeRmdirer     = (*viewNode)(nil)
	_ gofs.NodeRenamer     = (*viewNode)(nil)
	_ gofs.NodeOnForgetter = (*viewNode)(nil)
)

// OnForget drops what the mount kept about the kernel's pages of the node.
func (v *viewNode) OnForget() { v.fsys.viewPages.forget(viewIno(v.ino, v.prec)) }

// viewChild fills a view entry's attributes and returns its node. A
// rename or unlink in the mount tells the view nothing, so the kernel
// keeps a view entry for the shortest time it can (go-fuse replaces a zero
// with the mount's second): one tick of its clock, a few milliseconds,
// after which a walk asks again (a lookup costs what a stat of the file
// does). Kept for the mount's second, a name in the view read a directory
// renamed away under a file's name.
func (f *FS) viewChild(in *chain.Inode, p chain.Precision, out *fuse.EntryOut) *viewNode {
	viewAttr(in, p, &out.Attr)
	out.SetEntryTimeout(time.Nanosecond)
	out.SetAttrTimeout(viewAttrTime)
	return &viewNode{fsys: f, ino: in.Ino, prec: p}
}

// viewAttr is the inode's committed attributes, read-only, under its
// number in view p.
func viewAttr(in *chain.Inode, p chain.Precision, out *fuse.Attr) {
	out.Ino = viewIno(in.Ino, p)
	out.Mode = in.Mode &^ 0o222
	out.Nlink = in.Nlink
	out.Owner = fuse.Owner{Uid: in.Uid, Gid: in.Gid}
	out.Size = uint64(in.Size)
	out.Blksize = 4096
	out.Blocks = (uint64(in.Size) + 511) / 512
	at, mt, ct := time.Unix(0, in.Atime), time.Unix(0, in.Mtime), time.Unix(0, in.Ctime)
	out.SetTimes(&at, &mt, &ct)
}

// settleForView waits for the commits under way when ino has a staged
// save (closed, or still being written), so that the view shows a save
// closed before it was looked at; it reports whether it waited.
func (f *FS) settleForView(ino chain.Ino) bool {
	if f.stagedOf(ino) == nil {
		return false
	}
	f.Drain()
	return true
}

func viewable(mode uint32) bool {
	t := mode & syscall.S_IFMT
	return t == syscall.S_IFDIR || t == syscall.S_IFREG
}

func (v *viewNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*viewHandle); ok {
		viewAttr(&h.in, v.prec, &out.Attr)
		return 0
	}
	v.fsys.settleForView(v.ino)
	in, err := v.fsys.names.Inode(v.ino)
	if err != nil {
		return toErrno(err)
	}
	viewAttr(in, v.prec, &out.Attr)
	out.SetTimeout(viewAttrTime)
	return 0
}

func (v *viewNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, err := v.fsys.names.Lookup(v.ino, name)
	if err != nil {
		return nil, toErrno(err)
	}
	if v.fsys.settleForView(in.Ino) {
		if in, err = v.fsys.names.Inode(in.Ino); err != nil {
			return nil, toErrno(err)
		}
	}
	if !viewable(in.Mode) {
		return nil, syscall.ENOENT
	}
	return v.NewInode(ctx, v.fsys.viewChild(in, v.prec, out), gofs.StableAttr{Mode: in.Mode & syscall.S_IFMT, Ino: viewIno(in.Ino, v.prec), Gen: inodeGen}), 0
}

func (v *viewNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, err := v.fsys.names.ReadDir(v.ino)
	if err != nil {
		return nil, toErrno(err)
	}
	list := make([]fuse.DirEntry, 0, len(ents)+2)
	list = append(list, fuse.DirEntry{Name: ".", Ino: viewIno(v.ino, v.prec), Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR})
	for _, e := range ents {
		if viewable(e.Inode.Mode) {
			list = append(list, fuse.DirEntry{Name: e.Name, Ino: viewIno(e.Inode.Ino, v.prec), Mode: e.Inode.Mode})
		}
	}
	return gofs.NewListDirStream(list), 0
}

// Open opens the file's committed version at the view's precision, held
// for the handle's life as any reader's is.
func (v *viewNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	v.fsys.settleForView(v.ino)
	for {
		before, err := v.fsys.names.Inode(v.ino)
		if err != nil {
			return nil, 0, toErrno(err)
		}
		if before.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return nil, 0, syscall.EISDIR
		}
		release, err := v.fsys.store.HoldContent(v.ino)
		if err != nil {
			return nil, 0, toErrno(err)
		}
		in, err := v.fsys.names.Inode(v.ino)
		if err == nil && in.Version != before.Version {
			// A commit landed between the two reads: the hold may be
			// of either version. Try again.
			if release != nil {
				release()
			}
			continue
		}
		if err != nil {
			if release != nil {
				release()
			}
			return nil, 0, toErrno(err)
		}
		r, err := v.fsys.store.OpenPrecision(in.Version, v.prec)
		if err != nil {
			if release != nil {
				release()
			}
			return nil, 0, toErrno(err)
		}
		// The kernel keeps its pages only if they are all of this
		// version (viewcache.go).
		vino := viewIno(v.ino, v.prec)
		var fuseFlags uint32
		if v.fsys.viewPages.opened(vino, in.Version) {
			fuseFlags = fuse.FOPEN_KEEP_CACHE
		} else {
			// The kernel may hold the attributes of the version its pages
			// were of: it would drop the pages this open fills when it
			// next sees the times change. Asked again now, they are this
			// version's before the first read.
			v.NotifyContent(-1, 0)
		}
		return &viewHandle{r: r, in: *in, release: release, pages: &v.fsys.viewPages, vino: vino}, fuseFlags, 0
	}
}

// viewHandle reads one version's view.
type viewHandle struct {
	r       *chain.Reader
	in      chain.Inode // as opened: what fstat shows
	release func()
	pages   *viewPages
	vino    uint64
}

var (
	_ gofs.FileReader   = (*viewHandle)(nil)
	_ gofs.FileReleaser = (*viewHandle)(nil)
)

// testHookViewRead, when set, runs at each read of a view file that
// reaches the daemon.
var testHookViewRead atomic.Pointer[func()]

func (h *viewHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if hook := testHookViewRead.Load(); hook != nil {
		(*hook)()
	}
	n, err := h.r.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *viewHandle) Release(ctx context.Context) syscall.Errno {
	h.pages.closed(h.vino)
	if h.release != nil {
		h.release()
	}
	return 0
}

// The view is read-only.

func (v *viewNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (v *viewNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (v *viewNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (v *viewNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (v *viewNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (v *viewNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (v *viewNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (v *viewNode) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }

func (v *viewNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

package fs

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// controlDir is the read-only directory at the root that holds the live
// report, drop_caches and the precision view (view.go). It is not listed by readdir and no user file can take its name.
const controlDir = ".ckptfs"

// Inode numbers of the control nodes: far above any number the store hands
// out, so they never collide.
const (
	controlDropIno  = 1<<63 - 3
	controlDirIno   = 1<<63 - 2
	controlStatsIno = 1<<63 - 1
)

// The control nodes belong to the user who mounted (the daemon's user):
// the report names every file in the store, including files in
// directories another user could not list, so with --allow-other only the
// mount's owner (and root) may read it.
const (
	controlDirMode   = syscall.S_IFDIR | 0o555
	controlStatsMode = syscall.S_IFREG | 0o400
	controlDropMode  = syscall.S_IFREG | 0o200
)

// controlAttr fills the attributes every control node shares.
func (f *FS) controlAttr(out *fuse.Attr, mode uint32, ino uint64) {
	out.Mode, out.Ino = mode, ino
	out.Owner = fuse.Owner{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	out.Nlink = 1
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		out.Nlink = 2
	}
	t := f.started
	out.SetTimes(&t, &t, &t)
}

// controlNode returns the control directory's node.
func (n *Node) controlNode(ctx context.Context, out *fuse.EntryOut) *gofs.Inode {
	n.fsys.controlAttr(&out.Attr, controlDirMode, controlDirIno)
	return n.NewInode(ctx, &controlDirNode{fsys: n.fsys}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: controlDirIno})
}

type controlDirNode struct {
	gofs.Inode
	fsys *FS
}

var (
	_ gofs.NodeLookuper  = (*controlDirNode)(nil)
	_ gofs.NodeReaddirer = (*controlDirNode)(nil)
	_ gofs.NodeGetattrer = (*controlDirNode)(nil)
	_ gofs.NodeUnlinker  = (*controlDirNode)(nil)
	_ gofs.NodeRmdirer   = (*controlDirNode)(nil)
)

// Unlink refuses: go-fuse answers success for a directory node without
// Unlink (and drops the kernel's entry), so unlink of .ckptfs/stats.json
// would seem to work.
func (c *controlDirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return syscall.EPERM
}

// Rmdir refuses, for the same reason as Unlink.
func (c *controlDirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return syscall.EPERM
}

func (c *controlDirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c.fsys.controlAttr(&out.Attr, controlDirMode, controlDirIno)
	return 0
}

func (c *controlDirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == "drop_caches" {
		dn := &dropNode{fsys: c.fsys}
		c.fsys.controlAttr(&out.Attr, controlDropMode, controlDropIno)
		return c.NewInode(ctx, dn, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: controlDropIno}), 0
	}
	if name == viewDirName {
		c.fsys.controlAttr(&out.Attr, controlDirMode, controlViewIno)
		return c.NewInode(ctx, &viewTopNode{fsys: c.fsys}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: controlViewIno}), 0
	}
	if name != "stats.json" {
		return nil, syscall.ENOENT
	}
	sn := &statsNode{fsys: c.fsys}
	sn.attr(&out.Attr, nil)
	return c.NewInode(ctx, sn, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: controlStatsIno}), 0
}

func (c *controlDirNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream([]fuse.DirEntry{
		{Name: ".", Mode: syscall.S_IFDIR, Ino: controlDirIno},
		{Name: "..", Mode: syscall.S_IFDIR, Ino: uint64(chain.RootIno)},
		{Name: "drop_caches", Mode: syscall.S_IFREG, Ino: controlDropIno},
		{Name: "stats.json", Mode: syscall.S_IFREG, Ino: controlStatsIno},
		{Name: viewDirName, Mode: syscall.S_IFDIR, Ino: controlViewIno},
	}), 0
}

// dropNode is .ckptfs/drop_caches: a write to it makes the daemon forget
// the plain chunks it rebuilt for reads, and the copies of committed files
// no handle uses (readcopy.go), as `echo 3 > /proc/sys/vm/drop_caches` does
// the kernel's page cache, so that a read timed after both is cold. The
// reference tier (the newest save of each series, the next save's
// reference) stays. Only the mount's owner may write it.
type dropNode struct {
	gofs.Inode
	fsys *FS
}

var (
	_ gofs.NodeOpener    = (*dropNode)(nil)
	_ gofs.NodeGetattrer = (*dropNode)(nil)
	_ gofs.NodeSetattrer = (*dropNode)(nil)
)

func (d *dropNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fsys.controlAttr(&out.Attr, controlDropMode, controlDropIno)
	return 0
}

// Setattr accepts the truncate of `echo 1 > drop_caches` (O_TRUNC).
func (d *dropNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	d.fsys.controlAttr(&out.Attr, controlDropMode, controlDropIno)
	return 0
}

func (d *dropNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if !writable(flags) {
		return nil, 0, syscall.EACCES
	}
	return &dropHandle{fsys: d.fsys}, fuse.FOPEN_DIRECT_IO, 0
}

type dropHandle struct{ fsys *FS }

var _ gofs.FileWriter = (*dropHandle)(nil)

func (h *dropHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fsys.store.DropCaches()
	h.fsys.dropUnusedCopies()
	return uint32(len(data)), 0
}

// statsNode is .ckptfs/stats.json: a report rendered when opened.
type statsNode struct {
	gofs.Inode
	fsys *FS
}

var (
	_ gofs.NodeOpener    = (*statsNode)(nil)
	_ gofs.NodeGetattrer = (*statsNode)(nil)
)

func (s *statsNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	h, _ := fh.(*statsHandle)
	s.attr(&out.Attr, h)
	return 0
}

// attr gives the report's size (of the open handle's snapshot, else of a
// fresh one), so that stat, ls and tar see what a read returns, and the
// time it was rendered.
func (s *statsNode) attr(out *fuse.Attr, h *statsHandle) {
	s.fsys.controlAttr(out, controlStatsMode, controlStatsIno)
	if h == nil && s.fsys.Stats != nil {
		s.fsys.Drain() // the report that open will render
		if data, err := s.fsys.Stats(); err == nil {
			h = &statsHandle{data: data, at: time.Now()}
		}
	}
	if h != nil {
		out.Size = uint64(len(h.data))
		out.SetTimes(&h.at, &h.at, &h.at)
	}
}

func (s *statsNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		return nil, 0, syscall.EACCES
	}
	if s.fsys.Stats == nil {
		return nil, 0, syscall.ENOENT
	}
	s.fsys.Drain() // the report covers every file closed before
	data, err := s.fsys.Stats()
	if err != nil {
		return nil, 0, toErrno(err)
	}
	// Each open is a fresh snapshot of unknown size: bypass the page cache.
	return &statsHandle{data: data, at: time.Now()}, fuse.FOPEN_DIRECT_IO, 0
}

type statsHandle struct {
	data []byte
	at   time.Time
}

var _ gofs.FileReader = (*statsHandle)(nil)

func (h *statsHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(int64(len(h.data)), off+int64(len(dest)))]), 0
}

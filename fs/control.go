package fs

import (
	"context"
	"sort"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// controlDir is the read-only directory at the root that holds the live
// report. It is not listed by readdir and no user file can take its name.
const controlDir = ".ckptfs"

// Inode numbers of the control nodes: far above any number the store hands
// out, so they never collide.
const (
	controlDirIno   = 1<<63 - 2
	controlStatsIno = 1<<63 - 1
)

// controlNode returns the control directory's node.
func (n *Node) controlNode(ctx context.Context, out *fuse.EntryOut) *gofs.Inode {
	out.Attr.Mode = syscall.S_IFDIR | 0o555
	out.Attr.Ino = controlDirIno
	out.Attr.Nlink = 2
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
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	return 0
}

func (c *controlDirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name != "stats.json" {
		return nil, syscall.ENOENT
	}
	out.Attr.Mode = syscall.S_IFREG | 0o444
	out.Attr.Ino = controlStatsIno
	return c.NewInode(ctx, &statsNode{fsys: c.fsys}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: controlStatsIno}), 0
}

func (c *controlDirNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream([]fuse.DirEntry{{Name: "stats.json", Mode: syscall.S_IFREG, Ino: controlStatsIno}}), 0
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
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	if h, ok := fh.(*statsHandle); ok {
		out.Size = uint64(len(h.data))
	}
	return 0
}

func (s *statsNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		return nil, 0, syscall.EACCES
	}
	if s.fsys.Stats == nil {
		return nil, 0, syscall.ENOENT
	}
	data, err := s.fsys.Stats()
	if err != nil {
		return nil, 0, toErrno(err)
	}
	// Each open is a fresh snapshot of unknown size: bypass the page cache.
	return &statsHandle{data: data}, fuse.FOPEN_DIRECT_IO, 0
}

type statsHandle struct{ data []byte }

var _ gofs.FileReader = (*statsHandle)(nil)

func (h *statsHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(int64(len(h.data)), off+int64(len(dest)))]), 0
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

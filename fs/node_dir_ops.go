package fs

import (
	"context"
	"github.com/sirupsen/logrus"
	"syscall"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var (
	_ gofs.NodeLookuper   = (*Node)(nil)
	_ gofs.NodeReaddirer  = (*Node)(nil)
	_ gofs.NodeMkdirer    = (*Node)(nil)
	_ gofs.NodeMknoder    = (*Node)(nil)
	_ gofs.NodeSymlinker  = (*Node)(nil)
	_ gofs.NodeReadlinker = (*Node)(nil)
	_ gofs.NodeLinker     = (*Node)(nil)
	_ gofs.NodeUnlinker   = (*Node)(nil)
	_ gofs.NodeRmdirer    = (*Node)(nil)
	_ gofs.NodeRenamer    = (*Node)(nil)
)

// Lookup finds a child; the root also has the hidden control directory.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.ino == chain.RootIno && name == controlDir {
		return n.controlNode(ctx, out), 0
	}
	in, err := n.fsys.names.Lookup(n.ino, name)
	if err != nil {
		return nil, toErrno(err)
	}
	return n.child(ctx, in, out), 0
}

// Readdir lists the directory. The control directory is not listed.
func (n *Node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, err := n.fsys.names.ReadDir(n.ino)
	if err != nil {
		return nil, toErrno(err)
	}
	list := make([]fuse.DirEntry, 0, len(ents)+2)
	list = append(list, fuse.DirEntry{Name: ".", Ino: uint64(n.ino), Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR})
	for _, e := range ents {
		list = append(list, fuse.DirEntry{Name: e.Name, Ino: uint64(e.Inode.Ino), Mode: e.Inode.Mode})
	}
	return gofs.NewListDirStream(list), 0
}

func (n *Node) create(ctx context.Context, name string, nn chain.NewNode, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.ino == chain.RootIno && name == controlDir {
		return nil, syscall.EEXIST
	}
	if caller, ok := fuse.FromContext(ctx); ok {
		nn.Uid, nn.Gid = caller.Uid, caller.Gid
	}
	in, err := n.fsys.names.Create(n.ino, name, nn)
	if err != nil {
		return nil, toErrno(err)
	}
	return n.child(ctx, in, out), 0
}

// Mkdir makes a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.create(ctx, name, chain.NewNode{Mode: syscall.S_IFDIR | mode&07777}, out)
}

// Mknod makes a special file (a FIFO, a socket, a device node).
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.create(ctx, name, chain.NewNode{Mode: mode, Rdev: dev}, out)
}

// Symlink makes a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.create(ctx, name, chain.NewNode{Mode: syscall.S_IFLNK | 0o777, Target: target}, out)
}

// Readlink reads a symlink's target.
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil {
		return nil, toErrno(err)
	}
	return []byte(in.Target), 0
}

// Link adds a hard link to target.
func (n *Node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if n.ino == chain.RootIno && name == controlDir {
		return nil, syscall.EEXIST
	}
	in, err := n.fsys.names.Link(t.ino, n.ino, name)
	if err != nil {
		return nil, toErrno(err)
	}
	n.fsys.fillAttr(in, &out.Attr)
	return t.EmbeddedInode(), 0
}

// Unlink removes a name; an open file lives until its last handle closes.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.ino == chain.RootIno && name == controlDir {
		return syscall.EPERM
	}
	if in, err := n.fsys.names.Lookup(n.ino, name); err == nil && in.Mode&syscall.S_IFMT == syscall.S_IFREG {
		n.fsys.holdForStaged(in.Ino, n.childPath(name), nil)
	}
	return toErrno(n.fsys.names.Unlink(n.ino, name, n.fsys.open.inUse))
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.ino == chain.RootIno && name == controlDir {
		return syscall.EPERM
	}
	return toErrno(n.fsys.names.Rmdir(n.ino, name, n.fsys.open.inUse))
}

// Rename moves or exchanges names.
func (n *Node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if n.ino == chain.RootIno && name == controlDir || np.ino == chain.RootIno && newName == controlDir {
		return syscall.EPERM
	}
	if flags&^(chain.RenameNoReplace|chain.RenameExchange) != 0 {
		return syscall.EINVAL
	}
	src, lookupErr := n.fsys.names.Lookup(n.ino, name)
	if dst, err := n.fsys.names.Lookup(np.ino, newName); err == nil && flags&chain.RenameExchange == 0 &&
		dst.Mode&syscall.S_IFMT == syscall.S_IFREG && lookupErr == nil {
		var moving *stagedFile // the save renamed over it, if staged
		if of := n.fsys.open.get(src.Ino); of != nil {
			moving = of.staged.Load()
		}
		n.fsys.holdForStaged(dst.Ino, np.childPath(newName), moving)
	}
	if err := n.fsys.names.Rename(n.ino, name, np.ino, newName, flags, n.fsys.open.inUse); err != nil {
		return toErrno(err)
	}
	if lookupErr == nil && src.Mode&syscall.S_IFMT == syscall.S_IFREG && flags&chain.RenameExchange == 0 {
		// The file's content continues its new name's series (a save
		// written under a temporary name, then renamed). Staged content
		// takes the name it has when it is encoded; a commit under way
		// moves it once it lands.
		if of := n.fsys.open.get(src.Ino); of != nil {
			of.mu.Lock()
			staged, pending := of.stage != nil, of.save.Rename()
			of.mu.Unlock()
			if staged || pending {
				return 0
			}
		}
		newPath := newName
		if p := np.path(); p != "" {
			newPath = p + "/" + newName
		}
		if err := n.fsys.store.Adopt(src.Ino, newPath); err != nil {
			logrus.WithError(err).Warnf("rename %s: series of %s not updated", name, newPath)
		}
	}
	return 0
}

// childPath is the path of n's entry name below the root.
func (n *Node) childPath(name string) string {
	if p := n.path(); p != "" {
		return p + "/" + name
	}
	return name
}

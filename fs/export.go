package fs

import (
	"context"
	"slices"
	"strings"
	"syscall"

	"github.com/ckptfs/ckptfs/chain"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Export support: file handles (name_to_handle_at, open_by_handle_at, an
// NFS export) name a node by its FUSE node ID and generation. The node IDs
// are the store's inode numbers (Options.ExternalNodeID), which outlive
// the kernel's cache and the mount, so the kernel can ask for a node it
// forgot by number alone (LookupNode) and reconnect a directory to the tree
// (LookupParent).

// inodeGen is the generation of every node. The store never hands out an
// inode number twice (meta's next_ino counter only grows; a pull from a
// remote only raises it), so the number alone names one inode for the
// life of the store, and a handle of a deleted inode finds none (ESTALE)
// rather than a successor. 0, the generation the kernel gives the root.
const inodeGen = 0

// exportable sets the mount options export needs.
func exportable(o *gofs.Options) {
	o.ExternalNodeID = true
	// The root's node ID is always 1 (FUSE_ROOT_ID), which is also the
	// store's number for it; with its Ino set, a LookupParent answering
	// the root finds the root's node instead of registering a second one.
	o.RootStableAttr = &gofs.StableAttr{Ino: uint64(chain.RootIno), Gen: inodeGen}
	o.ExtraCapabilities |= fuse.CAP_EXPORT_SUPPORT
}

// stableAttr is the identity of a store inode's node.
func stableAttr(in *chain.Inode) gofs.StableAttr {
	return gofs.StableAttr{Mode: in.Mode & syscall.S_IFMT, Ino: uint64(in.Ino), Gen: inodeGen}
}

var (
	_ gofs.NodeLookupNoder    = (*Node)(nil)
	_ gofs.NodeLookupParenter = (*Node)(nil)
)

// staleErrno is ESTALE for an inode that is gone (a handle that outlived
// its file), else the error's errno.
func staleErrno(err error) syscall.Errno {
	if errno := toErrno(err); errno != syscall.ENOENT {
		return errno
	}
	return syscall.ESTALE
}

// LookupNode finds inode id for a file handle the kernel has no inode
// for (it forgot it, or the handle is from an earlier mount of the store).
// go-fuse calls it on the root only. An inode with no name left is being
// freed (the kernel holds no reference, or it would not ask): stale.
func (n *Node) LookupNode(ctx context.Context, id uint64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, err := n.fsys.names.Inode(chain.Ino(id))
	if err != nil {
		return nil, staleErrno(err)
	}
	if in.Nlink == 0 {
		return nil, syscall.ESTALE
	}
	if in.Ino == chain.RootIno {
		n.fsys.fillAttr(in, &out.Attr)
		return n.Root(), 0
	}
	return n.child(ctx, in, out), 0
}

// LookupParent answers ".." of a node reached by number alone, so that the
// kernel can connect a directory's handle to the tree: the directory that
// names n (a file with hard links: any one of them).
func (n *Node) LookupParent(ctx context.Context, out *fuse.EntryOut) (*gofs.Inode, string, syscall.Errno) {
	// The store scans its directory entries: no record links an inode to
	// its names.
	parent, name, err := n.fsys.names.Parent(n.ino)
	if err != nil {
		return nil, "", staleErrno(err)
	}
	in, err := n.fsys.names.Inode(parent)
	if err != nil {
		return nil, "", staleErrno(err)
	}
	if parent == chain.RootIno {
		n.fsys.fillAttr(in, &out.Attr)
		return n.Root(), name, 0
	}
	return n.child(ctx, in, out), name, 0
}

// treePath is n's path in go-fuse's tree, and whether that reaches the
// root: a file opened by handle has no parent there until something looks
// it up by name.
func (n *Node) treePath() (string, bool) {
	if n.ino == chain.RootIno {
		return "", true
	}
	root := n.Root()
	var names []string
	for p := n.EmbeddedInode(); p != root; {
		name, parent := p.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		p = parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), true
}

// storePath is a name the store has for ino ("" for none: an unnamed
// file's family). An inode with no link skips the scan: files written with
// no name (O_TMPFILE, unlinked while open) ask on every commit.
func (f *FS) storePath(ino chain.Ino) string {
	if in, err := f.names.Inode(ino); err != nil || in.Nlink == 0 {
		return ""
	}
	p, err := f.names.PathOf(ino)
	if err != nil {
		return ""
	}
	return p
}

package fs

import (
	"os"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// The store, as the filesystem sees it: one interface per role, each
// exactly the methods fs calls, with the signatures of chain's types
// (store_test.go checks that *chain.Store and its namespace play them).
// The readers and commits they hand out are chain's own types: Go has no
// covariant results, so fs-side interfaces for them would need an adapter
// wherever New is called.

// Names is the tree: inodes, their names and attributes.
type Names interface {
	Inode(ino chain.Ino) (*chain.Inode, error)
	Lookup(parent chain.Ino, name string) (*chain.Inode, error)
	ReadDir(ino chain.Ino) ([]chain.DirEntry, error)
	Create(parent chain.Ino, name string, nn chain.NewNode) (*chain.Inode, error)
	CreateUnnamed(parent chain.Ino, nn chain.NewNode) (*chain.Inode, error)
	Link(ino, newParent chain.Ino, newName string) (*chain.Inode, error)
	Unlink(parent chain.Ino, name string, isOpen func(chain.Ino) bool) error
	Rmdir(parent chain.Ino, name string, isOpen func(chain.Ino) bool) error
	Rename(oldParent chain.Ino, oldName string, newParent chain.Ino, newName string,
		flags uint32, isOpen func(chain.Ino) bool) error
	// Forget releases those of inos that are orphans, in one transaction.
	Forget(inos ...chain.Ino) error
	SetAttr(ino chain.Ino, fn func(n *chain.Inode) error) (*chain.Inode, error)
	// SetAtimes records reads' access times alone (no ctime change), in
	// one transaction; inodes gone since are skipped.
	SetAtimes(atimes map[chain.Ino]int64) error
	// Parent and PathOf find where an inode has a name (file handles,
	// export.go; an open-by-handle file's family).
	Parent(ino chain.Ino) (chain.Ino, string, error)
	PathOf(ino chain.Ino) (string, error)
}

// Xattrs are the inodes' extended attributes.
type Xattrs interface {
	Xattr(ino chain.Ino, name string) ([]byte, bool)
	ListXattr(ino chain.Ino) []string
	SetXattr(ino chain.Ino, name string, value []byte) error
	RemoveXattr(ino chain.Ino, name string) error
}

// Namespace is the store's namespace (chain.Store.Names).
type Namespace interface {
	Names
	Xattrs
}

// Contents commits files' content and reads it back.
type Contents interface {
	CommitFile(ino chain.Ino, path string, f *os.File, mtime int64) error
	BeginCommitFile(ino chain.Ino, path string) (*chain.FileCommit, error)
	// Adopt commits a staging file a crash left (hostspace.go).
	Adopt(ino chain.Ino, path string) error
	HoldContent(ino chain.Ino) (release func(), err error)
	OpenVersion(id chain.VersionID) (*chain.Reader, error)
	// OpenPrecision reads a version in a precision view (view.go).
	OpenPrecision(id chain.VersionID, p chain.Precision) (*chain.Reader, error)
	Info(ino chain.Ino) (*chain.FileInfo, error)
	// DropCaches forgets the rebuilt plain chunks kept for reads (.ckptfs/drop_caches).
	DropCaches()
}

// Space is the room on the device: the whole store's, and what fallocate
// holds for a file being written (space.go).
type Space interface {
	Statfs() chain.FSStat
	SpaceBytes() (total, free int64)
	ReserveSpace(ino chain.Ino, bytes int64) error
	UnreserveSpace(ino chain.Ino, bytes int64)
	ReservedSpace(ino chain.Ino) int64
}

// WriteBack is what the host's page cache does to the device and to the
// plain filesystem the shadow stands for.
type WriteBack interface {
	SyncData() error
	// ChargeStaged charges the device for staging-file bytes the host
	// wrote back (wear.go).
	ChargeStaged(bytes int64)
	ModelShadowWriteBack(expire time.Duration, limitBytes int64)
	WriteBackShadow(ino chain.Ino)
}

// Store is the store but its namespace: content, space and write-back.
type Store interface {
	Contents
	Space
	WriteBack
}

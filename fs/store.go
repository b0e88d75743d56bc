package fs

import (
	"time"

	"os"

	"github.com/ckptfs/ckptfs/chain"
)

// Store is what the filesystem needs of a store: exactly the methods fs
// calls, with *chain.Store's signatures, so that *chain.Store is one
// (store_test.go checks). The writers and readers it hands out are chain's
// own types: *chain.Store's methods return those, and Go has no covariant
// results, so fs-side interfaces for them would need an adapter wherever
// New is called.
type Store interface {
	// DropCaches forgets the rebuilt plain chunks kept for reads (.ckptfs/drop_caches).
	DropCaches()
	// Namespace.
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

	// Extended attributes.
	Xattr(ino chain.Ino, name string) ([]byte, bool)
	ListXattr(ino chain.Ino) []string
	SetXattr(ino chain.Ino, name string, value []byte) error
	RemoveXattr(ino chain.Ino, name string) error

	// Content.
	CommitFile(ino chain.Ino, path string, f *os.File, mtime int64) error
	BeginCommitFile(ino chain.Ino, path string) (*chain.FileCommit, error)
	ChargeStaged(bytes int64)
	HoldContent(ino chain.Ino) (release func(), err error)
	Adopt(ino chain.Ino, path string) error
	OpenVersion(id chain.VersionID) (*chain.Reader, error)
	Info(ino chain.Ino) (*chain.FileInfo, error)

	// Space fallocate holds for a file being written (space.go).
	ReserveSpace(ino chain.Ino, bytes int64) error
	UnreserveSpace(ino chain.Ino, bytes int64)
	ReservedSpace(ino chain.Ino) int64

	// The whole store.
	Statfs() chain.FSStat
	SpaceBytes() (total, free int64)
	SyncData() error
	// The plain filesystem the shadow stands for: its page cache.
	ModelShadowWriteBack(expire time.Duration, limitBytes int64)
	WriteBackShadow(ino chain.Ino)
}

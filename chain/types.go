package chain

import (
	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// The store's API speaks of inodes and versions; these are the metadata
// records' own types, so that the filesystem adapter and the command need
// not import the schema package.
type (
	// Ino numbers an inode.
	Ino = meta.Ino
	// Inode is a file's, directory's or symlink's attributes.
	Inode = meta.Inode
	// VersionID numbers a stored version of a file's content.
	VersionID = meta.VersionID
)

// RootIno is the root directory's inode.
const RootIno = meta.RootIno

// FamilyOf is the family of a file's path: its saves are coded against
// each other (chain/policy).
var FamilyOf = policy.FamilyOf

var (
	// ErrNoSpace: the device has no free pages for the data (ENOSPC).
	ErrNoSpace = meta.ErrNoSpace
	// ErrLocked: another process holds the store open.
	ErrLocked = meta.ErrLocked
	// ErrNotFound: a missing inode, entry or version (a reader's version
	// freed because a newer commit replaced it).
	ErrNotFound = meta.ErrNotFound
)

// The namespace's request and answer types, as the store's API names them.
type (
	// NewNode describes a node to create.
	NewNode = namespace.NewNode
	// DirEntry is a directory entry with its inode.
	DirEntry = namespace.DirEntry
)

// Rename flags (renameat2) and the longest name, from package namespace.
const (
	RenameNoReplace = namespace.RenameNoReplace
	RenameExchange  = namespace.RenameExchange
	MaxNameLen      = namespace.MaxNameLen
)

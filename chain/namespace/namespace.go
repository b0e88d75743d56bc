// Package namespace keeps the tree of names: inodes, directory entries,
// links, renames, attributes and extended attributes, in the store's
// metadata. It knows nothing of file content: when an inode loses its last
// name and handle, it deletes the inode and asks the store (Hooks.Drop) to
// release what the inode held.
package namespace

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/meta"
)

// ErrCorruptTree: the metadata holds a tree that cannot be (a directory
// loop).
var ErrCorruptTree = errors.New("corrupt directory tree")

// Hooks connect the namespace to the rest of the store.
type Hooks struct {
	// Drop releases, in tx, what a deleted inode held (its content).
	Drop func(tx *meta.Tx, n *meta.Inode) error
	// Changed is told of each change a plain filesystem would write a
	// metadata block for (the shadow's estimate).
	Changed func()
}

// Namespace is the tree of names in a metadata database.
type Namespace struct {
	db    *meta.DB
	now   func() time.Time
	hooks Hooks
}

// New keeps the namespace in db, with now for timestamps.
func New(db *meta.DB, now func() time.Time, hooks Hooks) *Namespace {
	if hooks.Changed == nil {
		hooks.Changed = func() {}
	}
	if hooks.Drop == nil {
		hooks.Drop = func(*meta.Tx, *meta.Inode) error { return nil }
	}
	return &Namespace{db: db, now: now, hooks: hooks}
}

// txn is a metadata transaction of the namespace.
type txn struct {
	mtx *meta.Tx
	ns  *Namespace
}

// update runs fn as a logged update: a change of names is durable against
// a kill of the daemon when it returns, and reaches a synced commit with
// the next save's (meta.DB.UpdateLogged), so a create or an unlink does not
// wait for the disk.
func (ns *Namespace) update(fn func(tx *txn) error) error {
	return ns.db.UpdateLogged(func(mtx *meta.Tx) error { return fn(&txn{mtx: mtx, ns: ns}) })
}

func (ns *Namespace) view(fn func(tx *txn) error) error {
	return ns.db.View(func(mtx *meta.Tx) error { return fn(&txn{mtx: mtx, ns: ns}) })
}

// File type bits of meta.Inode.Mode, as in stat(2).
const (
	modeType    = syscall.S_IFMT
	modeDir     = syscall.S_IFDIR
	modeRegular = syscall.S_IFREG
	modeSymlink = syscall.S_IFLNK
)

// MaxNameLen is the longest file name the store accepts, as on ext4.
const MaxNameLen = 255

// IsDir reports whether n is a directory.
func IsDir(n *meta.Inode) bool { return n.Mode&modeType == modeDir }

// errno wraps a POSIX error with what was being done.
func errno(op string, e syscall.Errno) error { return fmt.Errorf("%s: %w", op, e) }

// NotFound turns meta.ErrNotFound into ENOENT.
func NotFound(op string, err error) error {
	if errors.Is(err, meta.ErrNotFound) {
		return errno(op, syscall.ENOENT)
	}
	return err
}

// Inode reads an inode.
func (ns *Namespace) Inode(ino meta.Ino) (*meta.Inode, error) {
	var n *meta.Inode
	err := ns.db.View(func(tx *meta.Tx) error {
		var err error
		n, err = tx.Inode(ino)
		return err
	})
	return n, NotFound(fmt.Sprintf("inode %d", ino), err)
}

// Lookup finds name in directory parent. A name longer than any the
// namespace accepts is ENAMETOOLONG, not ENOENT, as on any filesystem.
func (ns *Namespace) Lookup(parent meta.Ino, name string) (*meta.Inode, error) {
	if len(name) > MaxNameLen {
		return nil, errno("lookup", syscall.ENAMETOOLONG)
	}
	var n *meta.Inode
	err := ns.db.View(func(tx *meta.Tx) error {
		ino, err := tx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err = tx.Inode(ino)
		return err
	})
	return n, NotFound("lookup "+name, err)
}

// DirEntry is a directory entry with its inode.
type DirEntry struct {
	Name  string
	Inode meta.Inode
}

// ReadDir lists directory ino.
func (ns *Namespace) ReadDir(ino meta.Ino) ([]DirEntry, error) {
	var out []DirEntry
	err := ns.db.View(func(tx *meta.Tx) error {
		ents, err := tx.ReadDir(ino)
		if err != nil {
			return err
		}
		for _, e := range ents {
			n, err := tx.Inode(e.Ino)
			if err != nil {
				return fmt.Errorf("entry %q: %w", e.Name, err)
			}
			out = append(out, DirEntry{Name: e.Name, Inode: *n})
		}
		return nil
	})
	return out, err
}

// NewNode describes a node to create.
type NewNode struct {
	Mode     uint32 // type and permission bits
	Uid, Gid uint32
	Rdev     uint32
	Target   string // symlink target
}

// inherit applies what a directory passes on to a node made in it: in a
// set-group-ID directory the node takes the directory's group, and a
// subdirectory keeps the bit, so that a team's directory stays the team's.
func (nn *NewNode) inherit(parent *meta.Inode) {
	if parent.Mode&syscall.S_ISGID == 0 {
		return
	}
	nn.Gid = parent.Gid
	if nn.Mode&modeType == modeDir {
		nn.Mode |= syscall.S_ISGID
	}
}

// Create makes a new file, directory, symlink or special node.
func (ns *Namespace) Create(parent meta.Ino, name string, nn NewNode) (*meta.Inode, error) {
	if len(name) > MaxNameLen {
		return nil, errno("create "+name, syscall.ENAMETOOLONG)
	}
	var n *meta.Inode
	err := ns.update(func(tx *txn) error {
		p, err := tx.mtx.Inode(parent)
		if err != nil {
			return err
		}
		if !IsDir(p) {
			return errno("create "+name, syscall.ENOTDIR)
		}
		if _, err := tx.mtx.Lookup(parent, name); err == nil {
			return errno("create "+name, syscall.EEXIST)
		}
		now := ns.now().UnixNano()
		nn.inherit(p)
		n = &meta.Inode{Mode: nn.Mode, Uid: nn.Uid, Gid: nn.Gid, Rdev: nn.Rdev, Nlink: 1,
			Atime: now, Mtime: now, Ctime: now, Target: nn.Target}
		if nn.Mode&modeType == modeSymlink {
			n.Size = int64(len(nn.Target))
		}
		if IsDir(n) {
			n.Nlink = 2
			p.Nlink++
		}
		if err := tx.mtx.NewInode(n); err != nil {
			return err
		}
		p.Mtime, p.Ctime = now, now
		if err := tx.mtx.PutInode(p); err != nil {
			return err
		}
		ns.hooks.Changed()
		return tx.mtx.Link(parent, name, n.Ino)
	})
	return n, NotFound("create "+name, err)
}

// CreateUnnamed makes a regular file with no name (O_TMPFILE) in directory
// parent: an orphan until Link gives it one, freed by Forget otherwise.
func (ns *Namespace) CreateUnnamed(parent meta.Ino, nn NewNode) (*meta.Inode, error) {
	var n *meta.Inode
	err := ns.update(func(tx *txn) error {
		p, err := tx.mtx.Inode(parent)
		if err != nil {
			return err
		}
		if !IsDir(p) {
			return errno("create unnamed file", syscall.ENOTDIR)
		}
		nn.inherit(p)
		now := ns.now().UnixNano()
		n = &meta.Inode{Mode: nn.Mode, Uid: nn.Uid, Gid: nn.Gid, Atime: now, Mtime: now, Ctime: now}
		if err := tx.mtx.NewInode(n); err != nil {
			return err
		}
		return tx.mtx.MarkOrphan(n.Ino)
	})
	return n, err
}

// Link adds the name newName in newParent for inode ino.
func (ns *Namespace) Link(ino, newParent meta.Ino, newName string) (*meta.Inode, error) {
	if len(newName) > MaxNameLen {
		return nil, errno("link "+newName, syscall.ENAMETOOLONG)
	}
	var n *meta.Inode
	err := ns.update(func(tx *txn) error {
		var err error
		if n, err = tx.mtx.Inode(ino); err != nil {
			return err
		}
		if IsDir(n) {
			return errno("link", syscall.EPERM)
		}
		if err := tx.mustBeDir(newParent, "link "+newName); err != nil {
			return err
		}
		if _, err := tx.mtx.Lookup(newParent, newName); err == nil {
			return errno("link "+newName, syscall.EEXIST)
		}
		if n.Nlink == 0 { // an O_TMPFILE file getting its first name
			if err := tx.mtx.UnmarkOrphan(ino); err != nil {
				return err
			}
		}
		n.Nlink++
		n.Ctime = ns.now().UnixNano()
		if err := tx.mtx.PutInode(n); err != nil {
			return err
		}
		ns.hooks.Changed()
		if err := tx.touchDir(newParent); err != nil {
			return err
		}
		return tx.mtx.Link(newParent, newName, ino)
	})
	return n, NotFound("link "+newName, err)
}

// Unlink removes a non-directory name. An inode whose last name goes stays
// while isOpen says it is open (as an orphan, released by Forget).
func (ns *Namespace) Unlink(parent meta.Ino, name string, isOpen func(meta.Ino) bool) error {
	err := ns.update(func(tx *txn) error {
		ino, err := tx.mtx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return err
		}
		if IsDir(n) {
			return errno("unlink "+name, syscall.EISDIR)
		}
		if err := tx.mtx.Unlink(parent, name); err != nil {
			return err
		}
		if err := tx.touchDir(parent); err != nil {
			return err
		}
		return tx.dropLink(n, isOpen)
	})
	return NotFound("unlink "+name, err)
}

// dropLink removes one link of n, releasing it if it was the last.
func (tx *txn) dropLink(n *meta.Inode, isOpen func(meta.Ino) bool) error {
	tx.ns.hooks.Changed()
	if n.Nlink > 1 {
		n.Nlink--
		n.Ctime = tx.ns.now().UnixNano()
		return tx.mtx.PutInode(n)
	}
	if isOpen != nil && isOpen(n.Ino) {
		n.Nlink = 0
		n.Ctime = tx.ns.now().UnixNano()
		if err := tx.mtx.PutInode(n); err != nil {
			return err
		}
		return tx.mtx.MarkOrphan(n.Ino)
	}
	return tx.dropInode(n.Ino)
}

// Forget releases orphans once their last handle is closed, in one
// transaction: a release commits synced (so that df and the next save see
// the space), and rm -rf of a checkpoint forgets its files in a burst.
func (ns *Namespace) Forget(inos ...meta.Ino) error {
	// The kernel forgets every inode it looked up; most still have names.
	// Only orphans need a write transaction (which costs pages).
	var orphans []meta.Ino
	err := ns.view(func(tx *txn) error {
		for _, ino := range inos {
			n, err := tx.mtx.Inode(ino)
			if err == nil && n.Nlink == 0 {
				orphans = append(orphans, ino)
			} else if err != nil && !errors.Is(err, meta.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil || len(orphans) == 0 {
		return err
	}
	return ns.update(func(tx *txn) error {
		for _, ino := range orphans {
			n, err := tx.mtx.Inode(ino)
			if errors.Is(err, meta.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if n.Nlink > 0 {
				continue
			}
			if err := tx.dropInode(ino); err != nil {
				return err
			}
		}
		return nil
	})
}

// mustBeDir fails with ENOTDIR unless ino is a directory (ENOENT if it is
// missing): an entry must never be made in a file.
func (tx *txn) mustBeDir(ino meta.Ino, op string) error {
	n, err := tx.mtx.Inode(ino)
	if err != nil {
		return err
	}
	if !IsDir(n) {
		return errno(op, syscall.ENOTDIR)
	}
	return nil
}

func (tx *txn) touchDir(ino meta.Ino) error {
	p, err := tx.mtx.Inode(ino)
	if err != nil {
		return err
	}
	now := tx.ns.now().UnixNano()
	p.Mtime, p.Ctime = now, now
	return tx.mtx.PutInode(p)
}

// Rmdir removes an empty directory; one still in use lives on as an orphan
// until Forget.
func (ns *Namespace) Rmdir(parent meta.Ino, name string, isOpen func(meta.Ino) bool) error {
	err := ns.update(func(tx *txn) error {
		ino, err := tx.mtx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return err
		}
		if !IsDir(n) {
			return errno("rmdir "+name, syscall.ENOTDIR)
		}
		if !tx.mtx.DirEmpty(ino) {
			return errno("rmdir "+name, syscall.ENOTEMPTY)
		}
		return tx.removeDir(parent, name, ino, isOpen)
	})
	return NotFound("rmdir "+name, err)
}

func (tx *txn) removeDir(parent meta.Ino, name string, ino meta.Ino, isOpen func(meta.Ino) bool) error {
	if err := tx.mtx.Unlink(parent, name); err != nil {
		return err
	}
	p, err := tx.mtx.Inode(parent)
	if err != nil {
		return err
	}
	now := tx.ns.now().UnixNano()
	p.Nlink--
	p.Mtime, p.Ctime = now, now
	if err := tx.mtx.PutInode(p); err != nil {
		return err
	}
	tx.ns.hooks.Changed()
	if isOpen != nil && isOpen(ino) {
		d, err := tx.mtx.Inode(ino)
		if err != nil {
			return err
		}
		d.Nlink, d.Ctime = 0, now
		if err := tx.mtx.PutInode(d); err != nil {
			return err
		}
		return tx.mtx.MarkOrphan(ino)
	}
	return tx.mtx.DeleteInode(ino)
}

// Rename flags, as in renameat2(2).
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// Rename moves oldName in oldParent to newName in newParent, replacing a
// compatible target atomically (a file over a file, a directory over an
// empty directory), or exchanging the two with RenameExchange.
func (ns *Namespace) Rename(oldParent meta.Ino, oldName string, newParent meta.Ino, newName string,
	flags uint32, isOpen func(meta.Ino) bool) error {
	if len(newName) > MaxNameLen {
		return errno("rename to "+newName, syscall.ENAMETOOLONG)
	}
	op := "rename " + oldName + " to " + newName
	err := ns.update(func(tx *txn) error {
		srcIno, err := tx.mtx.Lookup(oldParent, oldName)
		if err != nil {
			return err
		}
		src, err := tx.mtx.Inode(srcIno)
		if err != nil {
			return err
		}
		if err := tx.mustBeDir(newParent, op); err != nil {
			return err
		}
		if IsDir(src) && newParent != oldParent {
			if inside, err := tx.isAncestor(srcIno, newParent); err != nil || inside {
				if err == nil {
					err = errno(op, syscall.EINVAL)
				}
				return err
			}
		}
		dstIno, lookupErr := tx.mtx.Lookup(newParent, newName)
		exists := lookupErr == nil
		if !exists && !errors.Is(lookupErr, meta.ErrNotFound) {
			return lookupErr
		}
		if exists && dstIno == srcIno {
			return nil // same file: POSIX says do nothing
		}
		switch {
		case flags&RenameExchange != 0:
			if !exists {
				return errno(op, syscall.ENOENT)
			}
			// The target moves too: a directory must not land in
			// its own subtree either.
			if newParent != oldParent {
				dst, err := tx.mtx.Inode(dstIno)
				if err != nil {
					return err
				}
				if IsDir(dst) {
					if inside, err := tx.isAncestor(dstIno, oldParent); err != nil || inside {
						if err == nil {
							err = errno(op, syscall.EINVAL)
						}
						return err
					}
				}
			}
			return tx.exchange(oldParent, oldName, srcIno, newParent, newName, dstIno)
		case exists && flags&RenameNoReplace != 0:
			return errno(op, syscall.EEXIST)
		}
		if exists {
			dst, err := tx.mtx.Inode(dstIno)
			if err != nil {
				return err
			}
			switch {
			case IsDir(src) && !IsDir(dst):
				return errno(op, syscall.ENOTDIR)
			case !IsDir(src) && IsDir(dst):
				return errno(op, syscall.EISDIR)
			case IsDir(dst) && !tx.mtx.DirEmpty(dstIno):
				return errno(op, syscall.ENOTEMPTY)
			case IsDir(dst):
				if err := tx.removeDir(newParent, newName, dstIno, isOpen); err != nil {
					return err
				}
			default:
				if err := tx.mtx.Unlink(newParent, newName); err != nil {
					return err
				}
				if err := tx.dropLink(dst, isOpen); err != nil {
					return err
				}
			}
		}
		if err := tx.mtx.Unlink(oldParent, oldName); err != nil {
			return err
		}
		if err := tx.mtx.Link(newParent, newName, srcIno); err != nil {
			return err
		}
		if IsDir(src) && oldParent != newParent {
			if err := tx.adjustNlink(oldParent, -1); err != nil {
				return err
			}
			if err := tx.adjustNlink(newParent, +1); err != nil {
				return err
			}
		}
		src.Ctime = ns.now().UnixNano()
		if err := tx.mtx.PutInode(src); err != nil {
			return err
		}
		if err := tx.touchDir(oldParent); err != nil {
			return err
		}
		ns.hooks.Changed()
		return tx.touchDir(newParent)
	})
	return NotFound(op, err)
}

func (tx *txn) exchange(ap meta.Ino, an string, a meta.Ino, bp meta.Ino, bn string, b meta.Ino) error {
	if err := tx.mtx.Link(ap, an, b); err != nil {
		return err
	}
	if err := tx.mtx.Link(bp, bn, a); err != nil {
		return err
	}
	// Both inodes changed their entry: their ctime moves, as a rename's
	// source's does (ext4, tmpfs).
	now := tx.ns.now().UnixNano()
	for _, ino := range []meta.Ino{a, b} {
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return err
		}
		n.Ctime = now
		if err := tx.mtx.PutInode(n); err != nil {
			return err
		}
	}
	if ap != bp {
		for _, mv := range []struct {
			ino      meta.Ino
			from, to meta.Ino
		}{{a, ap, bp}, {b, bp, ap}} {
			n, err := tx.mtx.Inode(mv.ino)
			if err != nil {
				return err
			}
			if IsDir(n) {
				if err := tx.adjustNlink(mv.from, -1); err != nil {
					return err
				}
				if err := tx.adjustNlink(mv.to, +1); err != nil {
					return err
				}
			}
		}
	}
	tx.ns.hooks.Changed()
	if err := tx.touchDir(ap); err != nil {
		return err
	}
	return tx.touchDir(bp)
}

func (tx *txn) adjustNlink(ino meta.Ino, d int) error {
	n, err := tx.mtx.Inode(ino)
	if err != nil {
		return err
	}
	n.Nlink = uint32(int(n.Nlink) + d)
	return tx.mtx.PutInode(n)
}

// isAncestor reports whether dir is ino or lies below it, by walking up
// from dir through ".." entries recorded as parents.
func (tx *txn) isAncestor(ino, dir meta.Ino) (bool, error) {
	parents, err := tx.parentMap()
	if err != nil {
		return false, err
	}
	for d, hops := dir, 0; hops < 1<<16; hops++ {
		if d == ino {
			return true, nil
		}
		if d == meta.RootIno {
			return false, nil
		}
		p, ok := parents[d]
		if !ok {
			return false, nil
		}
		d = p
	}
	return false, fmt.Errorf("directory loop above inode %d: %w", dir, ErrCorruptTree)
}

// parentMap maps each directory to its parent directory.
func (tx *txn) parentMap() (map[meta.Ino]meta.Ino, error) {
	parents := map[meta.Ino]meta.Ino{}
	err := tx.mtx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
		parents[child] = parent // files' entries are harmless extras
		return nil
	})
	return parents, err
}

// SetAttr changes an inode's attributes (mode, owner, times) with fn.
func (ns *Namespace) SetAttr(ino meta.Ino, fn func(n *meta.Inode) error) (*meta.Inode, error) {
	var n *meta.Inode
	err := ns.update(func(tx *txn) error {
		var err error
		if n, err = tx.mtx.Inode(ino); err != nil {
			return err
		}
		if err := fn(n); err != nil {
			return err
		}
		n.Ctime = ns.now().UnixNano()
		ns.hooks.Changed()
		return tx.mtx.PutInode(n)
	})
	return n, NotFound(fmt.Sprintf("setattr inode %d", ino), err)
}

// Xattr reads an extended attribute.
func (ns *Namespace) Xattr(ino meta.Ino, name string) ([]byte, bool) {
	var v []byte
	var ok bool
	_ = ns.db.View(func(tx *meta.Tx) error { v, ok = tx.Xattr(ino, name); return nil })
	return v, ok
}

// ListXattr lists an inode's extended attributes.
func (ns *Namespace) ListXattr(ino meta.Ino) []string {
	var names []string
	_ = ns.db.View(func(tx *meta.Tx) error { names = tx.ListXattr(ino); return nil })
	return names
}

// SetAtime records an access of inode ino at atime. Unlike SetAttr it
// leaves the ctime alone: an access changes no attribute a user set, and
// a ctime moved by reads would make the next read's relatime check update
// the atime again.
func (ns *Namespace) SetAtime(ino meta.Ino, atime int64) error {
	err := ns.update(func(tx *txn) error {
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return err
		}
		n.Atime = atime
		ns.hooks.Changed()
		return tx.mtx.PutInode(n)
	})
	return NotFound(fmt.Sprintf("set atime of inode %d", ino), err)
}

// SetAtimes is SetAtime of many inodes in one transaction; inodes that no
// longer exist are skipped.
func (ns *Namespace) SetAtimes(atimes map[meta.Ino]int64) error {
	err := ns.update(func(tx *txn) error {
		for ino, at := range atimes {
			n, err := tx.mtx.Inode(ino)
			if errors.Is(err, meta.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if at <= n.Atime {
				continue
			}
			n.Atime = at
			if err := tx.mtx.PutInode(n); err != nil {
				return err
			}
		}
		ns.hooks.Changed()
		return nil
	})
	if err != nil {
		return fmt.Errorf("set access times: %w", err)
	}
	return nil
}

// SetXattr writes an extended attribute; the inode's ctime moves, as
// setxattr(2)'s does.
func (ns *Namespace) SetXattr(ino meta.Ino, name string, value []byte) error {
	return ns.update(func(tx *txn) error {
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return NotFound("setxattr", err)
		}
		if err := tx.mtx.SetXattr(ino, name, value); err != nil {
			return err
		}
		n.Ctime = ns.now().UnixNano()
		return tx.mtx.PutInode(n)
	})
}

// RemoveXattr deletes an extended attribute (ENODATA if absent); the
// inode's ctime moves.
func (ns *Namespace) RemoveXattr(ino meta.Ino, name string) error {
	return ns.update(func(tx *txn) error {
		ok, err := tx.mtx.RemoveXattr(ino, name)
		if err == nil && !ok {
			err = errno("removexattr "+name, syscall.ENODATA)
		}
		if err != nil {
			return err
		}
		n, err := tx.mtx.Inode(ino)
		if err != nil {
			return NotFound("removexattr", err)
		}
		n.Ctime = ns.now().UnixNano()
		return tx.mtx.PutInode(n)
	})
}

// dropInode deletes an inode with no names and no open handles, and has
// the store release what it held.
func (tx *txn) dropInode(ino meta.Ino) error {
	n, err := tx.mtx.Inode(ino)
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.mtx.DeleteInode(ino); err != nil {
		return err
	}
	return tx.ns.hooks.Drop(tx.mtx, n)
}

// Verify recounts links from the directory entries and reports, through
// add, entries that point nowhere, wrong link counts and unnamed inodes that
// are not orphans. It returns every inode.
func Verify(tx *meta.Tx, add func(string, string, ...any)) (map[meta.Ino]*meta.Inode, error) {
	inodes := map[meta.Ino]*meta.Inode{}
	if err := tx.ForEachInode(func(n *meta.Inode) error { inodes[n.Ino] = n; return nil }); err != nil {
		return nil, err
	}
	links := map[meta.Ino]uint32{meta.RootIno: 2}
	err := tx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
		p, ok := inodes[parent]
		if !ok {
			add("dangling-entry", "entry %q lives in missing directory %d", name, parent)
		} else if !IsDir(p) {
			add("dangling-entry", "entry %q lives in non-directory %d", name, parent)
		}
		c, ok := inodes[child]
		if !ok {
			add("dangling-entry", "entry %q in %d points at missing inode %d", name, parent, child)
			return nil
		}
		links[child]++
		if IsDir(c) {
			links[child]++  // its "."
			links[parent]++ // its ".."
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	orphans := map[meta.Ino]bool{}
	for _, o := range tx.Orphans() {
		orphans[o] = true
	}
	for ino, n := range inodes {
		if n.Nlink != links[ino] {
			add("link-count", "inode %d has nlink %d, %d entries found", ino, n.Nlink, links[ino])
		}
		if links[ino] == 0 && !orphans[ino] {
			add("leak", "inode %d has no name and is not an orphan", ino)
		}
	}
	return inodes, nil
}

// errFound stops a scan of the directory entries at its first match.
var errFound = errors.New("found")

// Parent returns a directory that holds an entry for ino, and the entry's
// name: a directory's one entry, the first in key order of a file's hard
// links. No record links an inode to its names, so it scans the directory
// entries, as PathOf does: for an inode the kernel asks for by number alone
// (a file handle), not for hot paths. An inode with no name (the root, an
// orphan, a deleted inode) is ENOENT.
func (ns *Namespace) Parent(ino meta.Ino) (meta.Ino, string, error) {
	var parent meta.Ino
	var name string
	err := ns.view(func(tx *txn) error {
		return tx.mtx.ForEachDirent(func(p meta.Ino, n string, child meta.Ino) error {
			if child != ino {
				return nil
			}
			parent, name = p, n
			return errFound
		})
	})
	switch {
	case errors.Is(err, errFound):
		return parent, name, nil
	case err != nil:
		return 0, "", fmt.Errorf("parent of inode %d: %w", ino, err)
	}
	return 0, "", fmt.Errorf("parent of inode %d: %w", ino, syscall.ENOENT)
}

package chain

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ckptfs/ckptfs/meta"
)

// File type bits of meta.Inode.Mode, as in stat(2).
const (
	modeType    = syscall.S_IFMT
	modeDir     = syscall.S_IFDIR
	modeRegular = syscall.S_IFREG
	modeSymlink = syscall.S_IFLNK
)

// MaxNameLen is the longest file name the store accepts, as on ext4.
const MaxNameLen = 255

func isDir(n *meta.Inode) bool { return n.Mode&modeType == modeDir }

// errno wraps a POSIX error with what was being done.
func errno(op string, e syscall.Errno) error { return fmt.Errorf("%s: %w", op, e) }

// notFound turns meta.ErrNotFound into ENOENT.
func notFound(op string, err error) error {
	if errors.Is(err, meta.ErrNotFound) {
		return errno(op, syscall.ENOENT)
	}
	return err
}

// Inode reads an inode.
func (s *Store) Inode(ino meta.Ino) (*meta.Inode, error) {
	var n *meta.Inode
	err := s.db.View(func(tx *meta.Tx) error {
		var err error
		n, err = tx.Inode(ino)
		return err
	})
	return n, notFound(fmt.Sprintf("inode %d", ino), err)
}

// Lookup finds name in directory parent.
func (s *Store) Lookup(parent meta.Ino, name string) (*meta.Inode, error) {
	var n *meta.Inode
	err := s.db.View(func(tx *meta.Tx) error {
		ino, err := tx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err = tx.Inode(ino)
		return err
	})
	return n, notFound("lookup "+name, err)
}

// DirEntry is a directory entry with its inode.
type DirEntry struct {
	Name  string
	Inode meta.Inode
}

// ReadDir lists directory ino.
func (s *Store) ReadDir(ino meta.Ino) ([]DirEntry, error) {
	var out []DirEntry
	err := s.db.View(func(tx *meta.Tx) error {
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

// Create makes a new file, directory, symlink or special node.
func (s *Store) Create(parent meta.Ino, name string, nn NewNode) (*meta.Inode, error) {
	if len(name) > MaxNameLen {
		return nil, errno("create "+name, syscall.ENAMETOOLONG)
	}
	var n *meta.Inode
	err := s.Update(func(tx *Tx) error {
		p, err := tx.Inode(parent)
		if err != nil {
			return err
		}
		if !isDir(p) {
			return errno("create "+name, syscall.ENOTDIR)
		}
		if _, err := tx.Lookup(parent, name); err == nil {
			return errno("create "+name, syscall.EEXIST)
		}
		now := s.now().UnixNano()
		n = &meta.Inode{Mode: nn.Mode, Uid: nn.Uid, Gid: nn.Gid, Rdev: nn.Rdev, Nlink: 1,
			Atime: now, Mtime: now, Ctime: now, Target: nn.Target}
		if nn.Mode&modeType == modeSymlink {
			n.Size = int64(len(nn.Target))
		}
		if isDir(n) {
			n.Nlink = 2
			p.Nlink++
		}
		if err := tx.NewInode(n); err != nil {
			return err
		}
		p.Mtime, p.Ctime = now, now
		if err := tx.PutInode(p); err != nil {
			return err
		}
		s.accountShadowMetadata(1)
		return tx.Link(parent, name, n.Ino)
	})
	return n, notFound("create "+name, err)
}

// CreateUnnamed makes a regular file with no name (O_TMPFILE): an orphan
// until Link gives it one, freed by Forget otherwise.
func (s *Store) CreateUnnamed(nn NewNode) (*meta.Inode, error) {
	var n *meta.Inode
	err := s.Update(func(tx *Tx) error {
		now := s.now().UnixNano()
		n = &meta.Inode{Mode: nn.Mode, Uid: nn.Uid, Gid: nn.Gid, Atime: now, Mtime: now, Ctime: now}
		if err := tx.NewInode(n); err != nil {
			return err
		}
		return tx.MarkOrphan(n.Ino)
	})
	return n, err
}

// Link adds the name newName in newParent for inode ino.
func (s *Store) Link(ino, newParent meta.Ino, newName string) (*meta.Inode, error) {
	if len(newName) > MaxNameLen {
		return nil, errno("link "+newName, syscall.ENAMETOOLONG)
	}
	var n *meta.Inode
	err := s.Update(func(tx *Tx) error {
		var err error
		if n, err = tx.Inode(ino); err != nil {
			return err
		}
		if isDir(n) {
			return errno("link", syscall.EPERM)
		}
		if _, err := tx.Lookup(newParent, newName); err == nil {
			return errno("link "+newName, syscall.EEXIST)
		}
		if n.Nlink == 0 { // an O_TMPFILE file getting its first name
			if err := tx.UnmarkOrphan(ino); err != nil {
				return err
			}
		}
		n.Nlink++
		n.Ctime = s.now().UnixNano()
		if err := tx.PutInode(n); err != nil {
			return err
		}
		s.accountShadowMetadata(1)
		return tx.Link(newParent, newName, ino)
	})
	return n, notFound("link "+newName, err)
}

// Unlink removes a non-directory name. An inode whose last name goes stays
// while isOpen says it is open (as an orphan, released by Forget).
func (s *Store) Unlink(parent meta.Ino, name string, isOpen func(meta.Ino) bool) error {
	err := s.Update(func(tx *Tx) error {
		ino, err := tx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		if isDir(n) {
			return errno("unlink "+name, syscall.EISDIR)
		}
		if err := tx.Unlink(parent, name); err != nil {
			return err
		}
		if err := tx.touchDir(parent); err != nil {
			return err
		}
		return tx.dropLink(n, isOpen)
	})
	return notFound("unlink "+name, err)
}

// dropLink removes one link of n, releasing it if it was the last.
func (tx *Tx) dropLink(n *meta.Inode, isOpen func(meta.Ino) bool) error {
	tx.s.accountShadowMetadata(1)
	if n.Nlink > 1 {
		n.Nlink--
		n.Ctime = tx.s.now().UnixNano()
		return tx.PutInode(n)
	}
	if isOpen != nil && isOpen(n.Ino) {
		n.Nlink = 0
		n.Ctime = tx.s.now().UnixNano()
		if err := tx.PutInode(n); err != nil {
			return err
		}
		return tx.MarkOrphan(n.Ino)
	}
	return tx.dropInode(n.Ino)
}

// Forget releases an orphan once its last handle is closed.
func (s *Store) Forget(ino meta.Ino) error {
	// The kernel forgets every inode it looked up; most still have names.
	// Only an orphan needs a write transaction (which costs pages).
	orphan := false
	err := s.View(func(tx *Tx) error {
		n, err := tx.Inode(ino)
		if err == nil {
			orphan = n.Nlink == 0
		} else if errors.Is(err, meta.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil || !orphan {
		return err
	}
	return s.Update(func(tx *Tx) error {
		n, err := tx.Inode(ino)
		if errors.Is(err, meta.ErrNotFound) {
			return nil
		}
		if err != nil || n.Nlink > 0 {
			return err
		}
		return tx.dropInode(ino)
	})
}

func (tx *Tx) touchDir(ino meta.Ino) error {
	p, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	now := tx.s.now().UnixNano()
	p.Mtime, p.Ctime = now, now
	return tx.PutInode(p)
}

// Rmdir removes an empty directory; one still in use lives on as an orphan
// until Forget.
func (s *Store) Rmdir(parent meta.Ino, name string, isOpen func(meta.Ino) bool) error {
	err := s.Update(func(tx *Tx) error {
		ino, err := tx.Lookup(parent, name)
		if err != nil {
			return err
		}
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		if !isDir(n) {
			return errno("rmdir "+name, syscall.ENOTDIR)
		}
		if !tx.DirEmpty(ino) {
			return errno("rmdir "+name, syscall.ENOTEMPTY)
		}
		return tx.removeDir(parent, name, ino, isOpen)
	})
	return notFound("rmdir "+name, err)
}

func (tx *Tx) removeDir(parent meta.Ino, name string, ino meta.Ino, isOpen func(meta.Ino) bool) error {
	if err := tx.Unlink(parent, name); err != nil {
		return err
	}
	p, err := tx.Inode(parent)
	if err != nil {
		return err
	}
	now := tx.s.now().UnixNano()
	p.Nlink--
	p.Mtime, p.Ctime = now, now
	if err := tx.PutInode(p); err != nil {
		return err
	}
	tx.s.accountShadowMetadata(1)
	if isOpen != nil && isOpen(ino) {
		d, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		d.Nlink, d.Ctime = 0, now
		if err := tx.PutInode(d); err != nil {
			return err
		}
		return tx.MarkOrphan(ino)
	}
	return tx.DeleteInode(ino)
}

// Rename flags, as in renameat2(2).
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// Rename moves oldName in oldParent to newName in newParent, replacing a
// compatible target atomically (a file over a file, a directory over an
// empty directory), or exchanging the two with RenameExchange.
func (s *Store) Rename(oldParent meta.Ino, oldName string, newParent meta.Ino, newName string,
	flags uint32, isOpen func(meta.Ino) bool) error {
	if len(newName) > MaxNameLen {
		return errno("rename to "+newName, syscall.ENAMETOOLONG)
	}
	op := "rename " + oldName + " to " + newName
	err := s.Update(func(tx *Tx) error {
		srcIno, err := tx.Lookup(oldParent, oldName)
		if err != nil {
			return err
		}
		src, err := tx.Inode(srcIno)
		if err != nil {
			return err
		}
		if isDir(src) && newParent != oldParent {
			if inside, err := tx.isAncestor(srcIno, newParent); err != nil || inside {
				if err == nil {
					err = errno(op, syscall.EINVAL)
				}
				return err
			}
		}
		dstIno, lookupErr := tx.Lookup(newParent, newName)
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
			return tx.exchange(oldParent, oldName, srcIno, newParent, newName, dstIno)
		case exists && flags&RenameNoReplace != 0:
			return errno(op, syscall.EEXIST)
		}
		if exists {
			dst, err := tx.Inode(dstIno)
			if err != nil {
				return err
			}
			switch {
			case isDir(src) && !isDir(dst):
				return errno(op, syscall.ENOTDIR)
			case !isDir(src) && isDir(dst):
				return errno(op, syscall.EISDIR)
			case isDir(dst) && !tx.DirEmpty(dstIno):
				return errno(op, syscall.ENOTEMPTY)
			case isDir(dst):
				if err := tx.removeDir(newParent, newName, dstIno, isOpen); err != nil {
					return err
				}
			default:
				if err := tx.Unlink(newParent, newName); err != nil {
					return err
				}
				if err := tx.dropLink(dst, isOpen); err != nil {
					return err
				}
			}
		}
		if err := tx.Unlink(oldParent, oldName); err != nil {
			return err
		}
		if err := tx.Link(newParent, newName, srcIno); err != nil {
			return err
		}
		if isDir(src) && oldParent != newParent {
			if err := tx.adjustNlink(oldParent, -1); err != nil {
				return err
			}
			if err := tx.adjustNlink(newParent, +1); err != nil {
				return err
			}
		}
		src.Ctime = s.now().UnixNano()
		if err := tx.PutInode(src); err != nil {
			return err
		}
		if err := tx.touchDir(oldParent); err != nil {
			return err
		}
		s.accountShadowMetadata(1)
		return tx.touchDir(newParent)
	})
	return notFound(op, err)
}

func (tx *Tx) exchange(ap meta.Ino, an string, a meta.Ino, bp meta.Ino, bn string, b meta.Ino) error {
	if err := tx.Link(ap, an, b); err != nil {
		return err
	}
	if err := tx.Link(bp, bn, a); err != nil {
		return err
	}
	if ap != bp {
		for _, mv := range []struct {
			ino      meta.Ino
			from, to meta.Ino
		}{{a, ap, bp}, {b, bp, ap}} {
			n, err := tx.Inode(mv.ino)
			if err != nil {
				return err
			}
			if isDir(n) {
				if err := tx.adjustNlink(mv.from, -1); err != nil {
					return err
				}
				if err := tx.adjustNlink(mv.to, +1); err != nil {
					return err
				}
			}
		}
	}
	tx.s.accountShadowMetadata(1)
	if err := tx.touchDir(ap); err != nil {
		return err
	}
	return tx.touchDir(bp)
}

func (tx *Tx) adjustNlink(ino meta.Ino, d int) error {
	n, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	n.Nlink = uint32(int(n.Nlink) + d)
	return tx.PutInode(n)
}

// isAncestor reports whether dir is ino or lies below it, by walking up
// from dir through ".." entries recorded as parents.
func (tx *Tx) isAncestor(ino, dir meta.Ino) (bool, error) {
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
	return false, fmt.Errorf("directory loop above inode %d: %w", dir, errCorruptManifest)
}

// parentMap maps each directory to its parent directory.
func (tx *Tx) parentMap() (map[meta.Ino]meta.Ino, error) {
	parents := map[meta.Ino]meta.Ino{}
	err := tx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
		parents[child] = parent // files' entries are harmless extras
		return nil
	})
	return parents, err
}

// SetAttr changes an inode's attributes (mode, owner, times) with fn.
func (s *Store) SetAttr(ino meta.Ino, fn func(n *meta.Inode) error) (*meta.Inode, error) {
	var n *meta.Inode
	err := s.Update(func(tx *Tx) error {
		var err error
		if n, err = tx.Inode(ino); err != nil {
			return err
		}
		if err := fn(n); err != nil {
			return err
		}
		n.Ctime = s.now().UnixNano()
		s.accountShadowMetadata(1)
		return tx.PutInode(n)
	})
	return n, notFound(fmt.Sprintf("setattr inode %d", ino), err)
}

// Xattr reads an extended attribute.
func (s *Store) Xattr(ino meta.Ino, name string) ([]byte, bool) {
	var v []byte
	var ok bool
	_ = s.db.View(func(tx *meta.Tx) error { v, ok = tx.Xattr(ino, name); return nil })
	return v, ok
}

// ListXattr lists an inode's extended attributes.
func (s *Store) ListXattr(ino meta.Ino) []string {
	var names []string
	_ = s.db.View(func(tx *meta.Tx) error { names = tx.ListXattr(ino); return nil })
	return names
}

// SetXattr writes an extended attribute.
func (s *Store) SetXattr(ino meta.Ino, name string, value []byte) error {
	return s.Update(func(tx *Tx) error {
		if _, err := tx.Inode(ino); err != nil {
			return notFound("setxattr", err)
		}
		return tx.SetXattr(ino, name, value)
	})
}

// RemoveXattr deletes an extended attribute (ENODATA if absent).
func (s *Store) RemoveXattr(ino meta.Ino, name string) error {
	return s.Update(func(tx *Tx) error {
		ok, err := tx.RemoveXattr(ino, name)
		if err == nil && !ok {
			err = errno("removexattr "+name, syscall.ENODATA)
		}
		return err
	})
}

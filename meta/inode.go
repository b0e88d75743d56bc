package meta

import (
	"bytes"
	"fmt"
)

// Inode reads an inode.
func (tx *Tx) Inode(ino Ino) (*Inode, error) {
	v := tx.tx.Bucket(bucketInodes).Get(u64key(uint64(ino)))
	if v == nil {
		return nil, fmt.Errorf("inode %d: %w", ino, ErrNotFound)
	}
	n := new(Inode)
	if err := n.unmarshal(v); err != nil {
		return nil, fmt.Errorf("inode %d: %w", ino, err)
	}
	return n, nil
}

// PutInode writes an inode.
func (tx *Tx) PutInode(n *Inode) error {
	return tx.bucket(bucketInodes).Put(u64key(uint64(n.Ino)), n.marshal())
}

// NewInode assigns a fresh inode number to n and stores it.
func (tx *Tx) NewInode(n *Inode) error {
	id, err := tx.nextID("next_ino")
	if err != nil {
		return err
	}
	n.Ino = Ino(id)
	return tx.PutInode(n)
}

// DeleteInode removes an inode, its xattrs and any orphan mark. The caller
// releases its content version and its shadow extents.
func (tx *Tx) DeleteInode(ino Ino) error {
	if err := tx.bucket(bucketInodes).Delete(u64key(uint64(ino))); err != nil {
		return err
	}
	if err := tx.deletePrefix(bucketXattrs, u64key(uint64(ino))); err != nil {
		return err
	}
	return tx.bucket(bucketOrphans).Delete(u64key(uint64(ino)))
}

// ForEachInode calls fn for every inode in number order.
func (tx *Tx) ForEachInode(fn func(*Inode) error) error {
	return tx.tx.Bucket(bucketInodes).ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return nil // the inode's shadow extents or a directory entry
		}
		n := new(Inode)
		if err := n.unmarshal(v); err != nil {
			return fmt.Errorf("inode %d: %w", keyU64(k), err)
		}
		return fn(n)
	})
}

// Tags after the inode number in the inodes bucket (format 2): an inode's
// record is ino (8), its shadow extents ino (8) ‖ tagShadow, a directory's
// entries ino (8) ‖ tagDirent ‖ name.
const (
	tagShadow byte = 1
	tagDirent byte = 2
)

// direntKey is the key of an entry of directory parent: parent (8) ‖ 2 ‖
// name, in the inodes bucket right after the directory's own record, so
// that a namespace change, which updates the directory too, rewrites one
// leaf.
func direntKey(parent Ino, name string) []byte {
	return append(direntPrefix(parent), name...)
}

func direntPrefix(parent Ino) []byte { return append(u64key(uint64(parent)), tagDirent) }

// isDirentKey tells a directory entry's key from an inode's (8 bytes) and
// from its shadow extents' (shadowKey).
func isDirentKey(k []byte) bool { return len(k) > 9 && k[8] == tagDirent }

// Lookup finds name in directory parent.
func (tx *Tx) Lookup(parent Ino, name string) (Ino, error) {
	v := tx.tx.Bucket(bucketInodes).Get(direntKey(parent, name))
	if len(v) != 8 {
		return 0, fmt.Errorf("lookup %q in %d: %w", name, parent, ErrNotFound)
	}
	return Ino(keyU64(v)), nil
}

// Link adds (or replaces) the entry name -> child in parent.
func (tx *Tx) Link(parent Ino, name string, child Ino) error {
	return tx.bucket(bucketInodes).Put(direntKey(parent, name), u64key(uint64(child)))
}

// Unlink removes the entry name from parent.
func (tx *Tx) Unlink(parent Ino, name string) error {
	return tx.bucket(bucketInodes).Delete(direntKey(parent, name))
}

// Dirent is one directory entry.
type Dirent struct {
	Name string
	Ino  Ino
}

// ReadDir lists a directory in name order.
func (tx *Tx) ReadDir(parent Ino) ([]Dirent, error) {
	var out []Dirent
	prefix := direntPrefix(parent)
	c := tx.tx.Bucket(bucketInodes).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		out = append(out, Dirent{Name: string(k[len(prefix):]), Ino: Ino(keyU64(v))})
	}
	return out, nil
}

// DirEmpty reports whether a directory has no entries.
func (tx *Tx) DirEmpty(parent Ino) bool {
	prefix := direntPrefix(parent)
	k, _ := tx.tx.Bucket(bucketInodes).Cursor().Seek(prefix)
	return k == nil || !bytes.HasPrefix(k, prefix)
}

// ForEachDirent calls fn for every directory entry of the store.
func (tx *Tx) ForEachDirent(fn func(parent Ino, name string, child Ino) error) error {
	return tx.tx.Bucket(bucketInodes).ForEach(func(k, v []byte) error {
		if !isDirentKey(k) {
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("dirent %x: %w", k, ErrCorruptRecord)
		}
		return fn(Ino(keyU64(k)), string(k[9:]), Ino(keyU64(v)))
	})
}

func xattrKey(ino Ino, name string) []byte { return append(u64key(uint64(ino)), name...) }

// Xattr reads an extended attribute.
func (tx *Tx) Xattr(ino Ino, name string) ([]byte, bool) {
	v := tx.tx.Bucket(bucketXattrs).Get(xattrKey(ino, name))
	if v == nil {
		return nil, false
	}
	return append([]byte{}, v...), true
}

// SetXattr writes an extended attribute.
func (tx *Tx) SetXattr(ino Ino, name string, value []byte) error {
	return tx.bucket(bucketXattrs).Put(xattrKey(ino, name), value)
}

// RemoveXattr deletes an extended attribute; it reports whether it existed.
func (tx *Tx) RemoveXattr(ino Ino, name string) (bool, error) {
	b := tx.bucket(bucketXattrs)
	k := xattrKey(ino, name)
	if b.Get(k) == nil {
		return false, nil
	}
	return true, b.Delete(k)
}

// ListXattr lists an inode's extended attribute names.
func (tx *Tx) ListXattr(ino Ino) []string {
	var names []string
	prefix := u64key(uint64(ino))
	c := tx.tx.Bucket(bucketXattrs).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		names = append(names, string(k[8:]))
	}
	return names
}

// MarkOrphan records an inode that has no name left but is still open, so
// that a restart after a crash can release it.
func (tx *Tx) MarkOrphan(ino Ino) error {
	return tx.bucket(bucketOrphans).Put(u64key(uint64(ino)), nil)
}

// UnmarkOrphan removes an orphan mark (a nameless file that got a name).
func (tx *Tx) UnmarkOrphan(ino Ino) error {
	return tx.bucket(bucketOrphans).Delete(u64key(uint64(ino)))
}

// Orphans lists inodes marked with MarkOrphan.
func (tx *Tx) Orphans() []Ino {
	var out []Ino
	_ = tx.tx.Bucket(bucketOrphans).ForEach(func(k, _ []byte) error {
		out = append(out, Ino(keyU64(k)))
		return nil
	})
	return out
}

func (tx *Tx) deletePrefix(bucket, prefix []byte) error {
	b := tx.bucket(bucket)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

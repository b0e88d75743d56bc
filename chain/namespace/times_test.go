package namespace_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

// TestSetAtime: an access time is recorded without moving the ctime or
// the mtime (a read is no change of the inode), and counts as a metadata
// write; a missing inode is ENOENT.
func TestSetAtime(t *testing.T) {
	f := newFixture(t)
	file := f.create(meta.RootIno, "f", fileMode)
	at := f.tick()
	changed := f.changed
	if err := f.ns.SetAtime(file.Ino, at); err != nil {
		t.Fatal(err)
	}
	n := f.inode(file.Ino)
	if n.Atime != at || n.Mtime != file.Mtime || n.Ctime != file.Ctime {
		t.Errorf("set atime %d: atime %d mtime %d ctime %d, want the atime only (mtime %d ctime %d)",
			at, n.Atime, n.Mtime, n.Ctime, file.Mtime, file.Ctime)
	}
	if f.changed != changed+1 {
		t.Errorf("set atime counted %d metadata changes, want 1", f.changed-changed)
	}
	if err := f.ns.SetAtime(9999, at); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("set atime of a missing inode: %v, want ENOENT", err)
	}
}

// TestXattrMovesCtime: setxattr and removexattr move the ctime (they
// left it, so stat missed the change), not the mtime; a removexattr of
// nothing fails and moves nothing.
func TestXattrMovesCtime(t *testing.T) {
	f := newFixture(t)
	file := f.create(meta.RootIno, "f", fileMode)
	at := f.tick()
	if err := f.ns.SetXattr(file.Ino, "user.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if n := f.inode(file.Ino); n.Ctime != at || n.Mtime != file.Mtime {
		t.Errorf("setxattr: ctime %d mtime %d, want %d and %d", n.Ctime, n.Mtime, at, file.Mtime)
	}
	at = f.tick()
	if err := f.ns.RemoveXattr(file.Ino, "user.a"); err != nil {
		t.Fatal(err)
	}
	if n := f.inode(file.Ino); n.Ctime != at || n.Mtime != file.Mtime {
		t.Errorf("removexattr: ctime %d mtime %d, want %d and %d", n.Ctime, n.Mtime, at, file.Mtime)
	}
	f.tick()
	if err := f.ns.RemoveXattr(file.Ino, "user.a"); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("removexattr of a missing attribute: %v, want ENODATA", err)
	}
	if n := f.inode(file.Ino); n.Ctime != at {
		t.Errorf("a failed removexattr moved the ctime to %d", n.Ctime)
	}
}

package namespace_test

import (
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

// TestParent: a directory's parent follows renames; a file with two names
// answers one of them; the root, an unlinked file and a missing inode have
// none (ENOENT).
func TestParent(t *testing.T) {
	f := newFixture(t)
	d := f.create(meta.RootIno, "d", dirMode)
	sub := f.create(d.Ino, "sub", dirMode)
	file := f.create(sub.Ino, "f", fileMode)
	if _, err := f.ns.Link(file.Ino, meta.RootIno, "hard"); err != nil {
		t.Fatal(err)
	}
	gone := f.create(d.Ino, "gone", fileMode)
	if err := f.ns.Unlink(d.Ino, "gone", func(meta.Ino) bool { return false }); err != nil {
		t.Fatal(err)
	}
	wantParent := func(ino, parent meta.Ino, name string) {
		t.Helper()
		p, n, err := f.ns.Parent(ino)
		if err != nil || p != parent || n != name {
			t.Errorf("Parent(%d) = %d, %q, %v; want %d, %q", ino, p, n, err, parent, name)
		}
	}
	wantParent(d.Ino, meta.RootIno, "d")
	wantParent(sub.Ino, d.Ino, "sub")
	// Entries sort by parent, so the root's name for the file comes first.
	wantParent(file.Ino, meta.RootIno, "hard")
	if err := f.ns.Rename(d.Ino, "sub", meta.RootIno, "moved", 0, func(meta.Ino) bool { return false }); err != nil {
		t.Fatal(err)
	}
	wantParent(sub.Ino, meta.RootIno, "moved")
	for _, ino := range []meta.Ino{meta.RootIno, gone.Ino, 9999} {
		_, _, err := f.ns.Parent(ino)
		wantErrno(t, err, syscall.ENOENT)
	}
}

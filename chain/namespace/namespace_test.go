package namespace_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/meta"
)

const (
	fileMode = syscall.S_IFREG | 0o644
	dirMode  = syscall.S_IFDIR | 0o755
)

// fixture is a namespace on a fresh metadata database, with a clock that
// moves only when the test says so (so a timestamp that changed was set by
// the operation under test) and a record of the inodes handed to Drop.
type fixture struct {
	t       *testing.T
	db      *meta.DB
	ns      *namespace.Namespace
	clock   time.Time
	dropped []meta.Ino
	changed int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := meta.Open(filepath.Join(t.TempDir(), "meta.db"), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{t: t, db: db, clock: time.Unix(1_700_000_000, 0)}
	// The store creates the root; the namespace expects it.
	err = db.Update(func(tx *meta.Tx) error {
		now := f.clock.UnixNano()
		return tx.PutInode(&meta.Inode{Ino: meta.RootIno, Mode: dirMode, Nlink: 2, Atime: now, Mtime: now, Ctime: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	f.ns = namespace.New(db, func() time.Time { return f.clock }, namespace.Hooks{
		Drop: func(_ *meta.Tx, n *meta.Inode) error {
			f.dropped = append(f.dropped, n.Ino)
			return nil
		},
		Changed: func() { f.changed++ },
	})
	// Every test ends with a tree whose link counts match its entries.
	t.Cleanup(f.verify)
	return f
}

// tick moves the clock on and returns the new time in nanoseconds.
func (f *fixture) tick() int64 {
	f.clock = f.clock.Add(time.Second)
	return f.clock.UnixNano()
}

func (f *fixture) create(parent meta.Ino, name string, mode uint32) *meta.Inode {
	f.t.Helper()
	n, err := f.ns.Create(parent, name, namespace.NewNode{Mode: mode})
	if err != nil {
		f.t.Fatalf("create %s: %v", name, err)
	}
	return n
}

func (f *fixture) inode(ino meta.Ino) *meta.Inode {
	f.t.Helper()
	n, err := f.ns.Inode(ino)
	if err != nil {
		f.t.Fatalf("inode %d: %v", ino, err)
	}
	return n
}

// lookup returns the inode number name has in parent, or 0 if none.
func (f *fixture) lookup(parent meta.Ino, name string) meta.Ino {
	f.t.Helper()
	n, err := f.ns.Lookup(parent, name)
	if errors.Is(err, syscall.ENOENT) {
		return 0
	}
	if err != nil {
		f.t.Fatalf("lookup %s: %v", name, err)
	}
	return n.Ino
}

func (f *fixture) wantNlink(ino meta.Ino, want uint32) {
	f.t.Helper()
	if got := f.inode(ino).Nlink; got != want {
		f.t.Errorf("inode %d: nlink %d, want %d", ino, got, want)
	}
}

// wantTouched checks that directory ino's mtime and ctime are at.
func (f *fixture) wantTouched(ino meta.Ino, at int64) {
	f.t.Helper()
	n := f.inode(ino)
	if n.Mtime != at || n.Ctime != at {
		f.t.Errorf("inode %d: mtime %d ctime %d, want both %d", ino, n.Mtime, n.Ctime, at)
	}
}

func (f *fixture) wantGone(ino meta.Ino) {
	f.t.Helper()
	if _, err := f.ns.Inode(ino); !errors.Is(err, syscall.ENOENT) {
		f.t.Errorf("inode %d: err %v, want ENOENT (deleted)", ino, err)
	}
}

func (f *fixture) orphans() []meta.Ino {
	f.t.Helper()
	var out []meta.Ino
	if err := f.db.View(func(tx *meta.Tx) error { out = tx.Orphans(); return nil }); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// verify runs the namespace's own consistency check over the whole tree.
func (f *fixture) verify() {
	f.t.Helper()
	var problems []string
	err := f.db.View(func(tx *meta.Tx) error {
		_, err := namespace.Verify(tx, func(kind, format string, args ...any) {
			problems = append(problems, kind+": "+fmt.Sprintf(format, args...))
		})
		return err
	})
	if err != nil {
		f.t.Errorf("verify: %v", err)
	}
	for _, p := range problems {
		f.t.Errorf("verify: %s", p)
	}
}

func wantErrno(t *testing.T, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("err = %v, want %v", err, want)
	}
}

func openSet(inos ...meta.Ino) func(meta.Ino) bool {
	return func(ino meta.Ino) bool { return slices.Contains(inos, ino) }
}

func TestCreate(t *testing.T) {
	f := newFixture(t)
	at := f.tick()
	file := f.create(meta.RootIno, "f", fileMode)
	if file.Nlink != 1 || file.Mtime != at || file.Ctime != at {
		t.Errorf("new file: nlink %d mtime %d ctime %d, want 1 and %d", file.Nlink, file.Mtime, file.Ctime, at)
	}
	f.wantTouched(meta.RootIno, at)
	f.wantNlink(meta.RootIno, 2) // a file adds no ".."
	if f.changed == 0 {
		t.Error("create did not tell the shadow of a metadata change")
	}

	at = f.tick()
	dir := f.create(meta.RootIno, "d", dirMode)
	f.wantNlink(dir.Ino, 2)      // its name and its "."
	f.wantNlink(meta.RootIno, 3) // its ".." counts in the parent
	f.wantTouched(meta.RootIno, at)

	link, err := f.ns.Create(dir.Ino, "l", namespace.NewNode{Mode: syscall.S_IFLNK | 0o777, Target: "../f"})
	if err != nil {
		t.Fatal(err)
	}
	if link.Size != int64(len("../f")) || link.Target != "../f" {
		t.Errorf("symlink: size %d target %q", link.Size, link.Target)
	}

	long := strings.Repeat("x", namespace.MaxNameLen)
	if _, err := f.ns.Create(meta.RootIno, long, namespace.NewNode{Mode: fileMode}); err != nil {
		t.Errorf("name of MaxNameLen bytes: %v", err)
	}

	for _, tc := range []struct {
		name   string
		parent meta.Ino
		file   string
		want   syscall.Errno
	}{
		{"existing file", meta.RootIno, "f", syscall.EEXIST},
		{"existing directory", meta.RootIno, "d", syscall.EEXIST},
		{"parent is a file", file.Ino, "x", syscall.ENOTDIR},
		{"parent missing", 9999, "x", syscall.ENOENT},
		{"name too long", meta.RootIno, long + "x", syscall.ENAMETOOLONG},
	} {
		before := snapshot(t, f)
		f.tick()
		_, err := f.ns.Create(tc.parent, tc.file, namespace.NewNode{Mode: fileMode})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		// A failed create changes nothing.
		if after := snapshot(t, f); after != before {
			t.Errorf("%s: failed create changed the tree:\nbefore %s\nafter  %s", tc.name, before, after)
		}
	}
	if got := f.inode(f.lookup(meta.RootIno, "f")); got.Ino != file.Ino {
		t.Errorf("f now inode %d, want the original %d", got.Ino, file.Ino)
	}
}

// A set-group-ID directory passes its group on, and its bit to
// subdirectories only.
func TestCreateInheritsSetGID(t *testing.T) {
	f := newFixture(t)
	team, err := f.ns.Create(meta.RootIno, "team", namespace.NewNode{Mode: dirMode | syscall.S_ISGID, Gid: 500})
	if err != nil {
		t.Fatal(err)
	}
	file, err := f.ns.Create(team.Ino, "f", namespace.NewNode{Mode: fileMode, Gid: 100})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.ns.Create(team.Ino, "sub", namespace.NewNode{Mode: dirMode, Gid: 100})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := f.ns.Create(meta.RootIno, "plain", namespace.NewNode{Mode: dirMode, Gid: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what     string
		n        *meta.Inode
		gid      uint32
		setgid   bool
		modeKept uint32
	}{
		{"file in team", file, 500, false, fileMode},
		{"dir in team", sub, 500, true, dirMode},
		{"dir in root", plain, 100, false, dirMode},
	} {
		if tc.n.Gid != tc.gid || (tc.n.Mode&syscall.S_ISGID != 0) != tc.setgid || tc.n.Mode&^syscall.S_ISGID != tc.modeKept {
			t.Errorf("%s: gid %d mode %o, want gid %d setgid %v", tc.what, tc.n.Gid, tc.n.Mode, tc.gid, tc.setgid)
		}
	}
}

func TestLink(t *testing.T) {
	f := newFixture(t)
	dir := f.create(meta.RootIno, "d", dirMode)
	file := f.create(meta.RootIno, "f", fileMode)

	at := f.tick()
	n, err := f.ns.Link(file.Ino, dir.Ino, "g")
	if err != nil {
		t.Fatal(err)
	}
	if n.Nlink != 2 {
		t.Errorf("returned nlink %d, want 2", n.Nlink)
	}
	f.wantNlink(file.Ino, 2)
	if got := f.inode(file.Ino); got.Ctime != at || got.Mtime == at {
		t.Errorf("linked file: ctime %d mtime %d, want ctime %d and mtime unchanged", got.Ctime, got.Mtime, at)
	}
	f.wantTouched(dir.Ino, at)
	if got := f.lookup(dir.Ino, "g"); got != file.Ino {
		t.Errorf("d/g is inode %d, want %d", got, file.Ino)
	}

	for _, tc := range []struct {
		name    string
		ino     meta.Ino
		parent  meta.Ino
		newName string
		want    syscall.Errno
	}{
		{"directory", dir.Ino, meta.RootIno, "d2", syscall.EPERM},
		{"name taken", file.Ino, meta.RootIno, "d", syscall.EEXIST},
		{"same name again", file.Ino, dir.Ino, "g", syscall.EEXIST},
		{"missing inode", 9999, meta.RootIno, "x", syscall.ENOENT},
		{"missing parent", file.Ino, 9999, "x", syscall.ENOENT},
		{"parent is a file", file.Ino, file.Ino, "x", syscall.ENOTDIR},
		{"name too long", file.Ino, meta.RootIno, strings.Repeat("x", namespace.MaxNameLen+1), syscall.ENAMETOOLONG},
	} {
		before := snapshot(t, f)
		if _, err := f.ns.Link(tc.ino, tc.parent, tc.newName); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if after := snapshot(t, f); after != before {
			t.Errorf("%s: failed link changed the tree:\nbefore %s\nafter  %s", tc.name, before, after)
		}
	}
	f.wantNlink(file.Ino, 2) // no failed link counted
	f.wantNlink(dir.Ino, 2)
}

// An O_TMPFILE file is an orphan until linked, and is freed by Forget if
// never linked.
func TestCreateUnnamed(t *testing.T) {
	f := newFixture(t)
	linked, err := f.ns.CreateUnnamed(meta.RootIno, namespace.NewNode{Mode: fileMode})
	if err != nil {
		t.Fatal(err)
	}
	unlinked, err := f.ns.CreateUnnamed(meta.RootIno, namespace.NewNode{Mode: fileMode})
	if err != nil {
		t.Fatal(err)
	}
	if linked.Nlink != 0 {
		t.Errorf("unnamed file nlink %d, want 0", linked.Nlink)
	}
	if got := f.orphans(); !slices.Contains(got, linked.Ino) || !slices.Contains(got, unlinked.Ino) {
		t.Errorf("orphans %v, want both %d and %d", got, linked.Ino, unlinked.Ino)
	}
	if _, err := f.ns.Link(linked.Ino, meta.RootIno, "named"); err != nil {
		t.Fatal(err)
	}
	f.wantNlink(linked.Ino, 1)
	if got := f.orphans(); slices.Contains(got, linked.Ino) {
		t.Errorf("linked file still an orphan: %v", got)
	}
	if err := f.ns.Forget(linked.Ino); err != nil {
		t.Fatal(err)
	}
	f.wantNlink(linked.Ino, 1) // Forget leaves a named file alone
	if err := f.ns.Forget(unlinked.Ino); err != nil {
		t.Fatal(err)
	}
	f.wantGone(unlinked.Ino)
	if !slices.Equal(f.dropped, []meta.Ino{unlinked.Ino}) {
		t.Errorf("dropped %v, want [%d]", f.dropped, unlinked.Ino)
	}
	if _, err := f.ns.CreateUnnamed(linked.Ino, namespace.NewNode{Mode: fileMode}); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("unnamed file in a file: %v, want ENOTDIR", err)
	}
}

func TestUnlink(t *testing.T) {
	f := newFixture(t)
	dir := f.create(meta.RootIno, "d", dirMode)
	closed := f.create(meta.RootIno, "closed", fileMode)
	open := f.create(meta.RootIno, "open", fileMode)
	twice := f.create(meta.RootIno, "twice", fileMode)
	if _, err := f.ns.Link(twice.Ino, dir.Ino, "again"); err != nil {
		t.Fatal(err)
	}
	isOpen := openSet(open.Ino)

	wantErrno(t, f.ns.Unlink(meta.RootIno, "d", isOpen), syscall.EISDIR)
	wantErrno(t, f.ns.Unlink(meta.RootIno, "missing", isOpen), syscall.ENOENT)
	wantErrno(t, f.ns.Unlink(closed.Ino, "x", isOpen), syscall.ENOENT)
	if f.lookup(meta.RootIno, "d") != dir.Ino {
		t.Fatal("EISDIR unlink removed the directory's name")
	}

	// A closed file's last name: freed, its content dropped.
	at := f.tick()
	if err := f.ns.Unlink(meta.RootIno, "closed", isOpen); err != nil {
		t.Fatal(err)
	}
	f.wantGone(closed.Ino)
	f.wantTouched(meta.RootIno, at)
	if !slices.Equal(f.dropped, []meta.Ino{closed.Ino}) {
		t.Errorf("dropped %v, want [%d]", f.dropped, closed.Ino)
	}

	// An open file's last name: an orphan until Forget.
	at = f.tick()
	if err := f.ns.Unlink(meta.RootIno, "open", isOpen); err != nil {
		t.Fatal(err)
	}
	if f.lookup(meta.RootIno, "open") != 0 {
		t.Error("name of unlinked open file still there")
	}
	n := f.inode(open.Ino)
	if n.Nlink != 0 || n.Ctime != at {
		t.Errorf("open orphan: nlink %d ctime %d, want 0 and %d", n.Nlink, n.Ctime, at)
	}
	if !slices.Equal(f.orphans(), []meta.Ino{open.Ino}) {
		t.Errorf("orphans %v, want [%d]", f.orphans(), open.Ino)
	}
	if len(f.dropped) != 1 {
		t.Errorf("open file's content dropped while open: %v", f.dropped)
	}
	if err := f.ns.Forget(open.Ino); err != nil {
		t.Fatal(err)
	}
	f.wantGone(open.Ino)
	if len(f.orphans()) != 0 || !slices.Contains(f.dropped, open.Ino) {
		t.Errorf("after Forget: orphans %v dropped %v", f.orphans(), f.dropped)
	}
	if err := f.ns.Forget(open.Ino); err != nil {
		t.Errorf("second Forget: %v", err) // the kernel may forget twice
	}

	// One of two names: the inode stays, one link fewer, ctime moves.
	at = f.tick()
	if err := f.ns.Unlink(dir.Ino, "again", nil); err != nil {
		t.Fatal(err)
	}
	n = f.inode(twice.Ino)
	if n.Nlink != 1 || n.Ctime != at {
		t.Errorf("file with a name left: nlink %d ctime %d, want 1 and %d", n.Nlink, n.Ctime, at)
	}
	f.wantTouched(dir.Ino, at)
	if slices.Contains(f.dropped, twice.Ino) {
		t.Error("file with a name left was dropped")
	}
	// A nil isOpen means nothing is open.
	if err := f.ns.Unlink(meta.RootIno, "twice", nil); err != nil {
		t.Fatal(err)
	}
	f.wantGone(twice.Ino)
}

func TestRmdir(t *testing.T) {
	f := newFixture(t)
	full := f.create(meta.RootIno, "full", dirMode)
	f.create(full.Ino, "child", fileMode)
	empty := f.create(meta.RootIno, "empty", dirMode)
	busy := f.create(meta.RootIno, "busy", dirMode)
	f.create(meta.RootIno, "file", fileMode)
	f.wantNlink(meta.RootIno, 5)

	wantErrno(t, f.ns.Rmdir(meta.RootIno, "file", nil), syscall.ENOTDIR)
	wantErrno(t, f.ns.Rmdir(meta.RootIno, "full", nil), syscall.ENOTEMPTY)
	wantErrno(t, f.ns.Rmdir(meta.RootIno, "missing", nil), syscall.ENOENT)
	f.wantNlink(meta.RootIno, 5)

	at := f.tick()
	if err := f.ns.Rmdir(meta.RootIno, "empty", nil); err != nil {
		t.Fatal(err)
	}
	f.wantGone(empty.Ino)
	f.wantNlink(meta.RootIno, 4)
	f.wantTouched(meta.RootIno, at)

	// A directory still open (a process's cwd) lives on as an orphan.
	if err := f.ns.Rmdir(meta.RootIno, "busy", openSet(busy.Ino)); err != nil {
		t.Fatal(err)
	}
	f.wantNlink(meta.RootIno, 3)
	f.wantNlink(busy.Ino, 0)
	if !slices.Equal(f.orphans(), []meta.Ino{busy.Ino}) {
		t.Errorf("orphans %v, want [%d]", f.orphans(), busy.Ino)
	}
	if err := f.ns.Forget(busy.Ino); err != nil {
		t.Fatal(err)
	}
	f.wantGone(busy.Ino)

	// Emptied, the full one goes too.
	if err := f.ns.Unlink(full.Ino, "child", nil); err != nil {
		t.Fatal(err)
	}
	if err := f.ns.Rmdir(meta.RootIno, "full", nil); err != nil {
		t.Fatal(err)
	}
	f.wantNlink(meta.RootIno, 2)
}

// tree is the layout each rename case starts from:
//
//	/a/            directory with /a/sub/ and /a/sub/deep/
//	/a/file        file
//	/b/            directory
//	/b/file        file
//	/empty/        empty directory
//	/full/x        non-empty directory
//	/f, /g         files
//	/h             a second name of /f
type tree struct {
	a, sub, deep, aFile, b, bFile, empty, full, x, f, g meta.Ino
}

func newTree(t *testing.T) (*fixture, tree) {
	t.Helper()
	fx := newFixture(t)
	var tr tree
	tr.a = fx.create(meta.RootIno, "a", dirMode).Ino
	tr.sub = fx.create(tr.a, "sub", dirMode).Ino
	tr.deep = fx.create(tr.sub, "deep", dirMode).Ino
	tr.aFile = fx.create(tr.a, "file", fileMode).Ino
	tr.b = fx.create(meta.RootIno, "b", dirMode).Ino
	tr.bFile = fx.create(tr.b, "file", fileMode).Ino
	tr.empty = fx.create(meta.RootIno, "empty", dirMode).Ino
	tr.full = fx.create(meta.RootIno, "full", dirMode).Ino
	tr.x = fx.create(tr.full, "x", fileMode).Ino
	tr.f = fx.create(meta.RootIno, "f", fileMode).Ino
	tr.g = fx.create(meta.RootIno, "g", fileMode).Ino
	if _, err := fx.ns.Link(tr.f, meta.RootIno, "h"); err != nil {
		t.Fatal(err)
	}
	return fx, tr
}

// Renames that must fail, and leave the tree as it was.
func TestRenameErrors(t *testing.T) {
	long := strings.Repeat("n", namespace.MaxNameLen+1)
	for _, tc := range []struct {
		name     string
		from, to func(tree) (meta.Ino, string)
		flags    uint32
		want     syscall.Errno
	}{
		{name: "directory over non-empty directory",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "empty" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "full" }, want: syscall.ENOTEMPTY},
		{name: "directory over file",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "empty" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" }, want: syscall.ENOTDIR},
		{name: "file over directory",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "empty" }, want: syscall.EISDIR},
		{name: "directory into its child",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" },
			to:   func(tr tree) (meta.Ino, string) { return tr.sub, "a" }, want: syscall.EINVAL},
		{name: "directory into its grandchild",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" },
			to:   func(tr tree) (meta.Ino, string) { return tr.deep, "x" }, want: syscall.EINVAL},
		{name: "directory into itself",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" },
			to:   func(tr tree) (meta.Ino, string) { return tr.a, "a" }, want: syscall.EINVAL},
		{name: "exchange a directory with its own descendant",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" },
			to:   func(tr tree) (meta.Ino, string) { return tr.sub, "deep" }, flags: namespace.RenameExchange, want: syscall.EINVAL},
		// The target of an exchange moves too: put below itself, it
		// would leave a loop cut off from the root. A mount's kernel
		// refuses this before asking; the store's API must as well.
		{name: "exchange a directory with its own ancestor",
			from: func(tr tree) (meta.Ino, string) { return tr.sub, "deep" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" }, flags: namespace.RenameExchange, want: syscall.EINVAL},
		{name: "noreplace onto a file",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "f" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" }, flags: namespace.RenameNoReplace, want: syscall.EEXIST},
		{name: "noreplace onto an empty directory",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "a" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "empty" }, flags: namespace.RenameNoReplace, want: syscall.EEXIST},
		{name: "exchange with a missing name",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "f" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "missing" }, flags: namespace.RenameExchange, want: syscall.ENOENT},
		{name: "missing source",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "missing" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, "new" }, want: syscall.ENOENT},
		{name: "missing target directory",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" },
			to:   func(tr tree) (meta.Ino, string) { return 9999, "g" }, want: syscall.ENOENT},
		// An entry in a file would be a dangling entry (Verify).
		{name: "target directory is a file",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" },
			to:   func(tr tree) (meta.Ino, string) { return tr.f, "g" }, want: syscall.ENOTDIR},
		{name: "name too long",
			from: func(tr tree) (meta.Ino, string) { return meta.RootIno, "g" },
			to:   func(tr tree) (meta.Ino, string) { return meta.RootIno, long }, want: syscall.ENAMETOOLONG},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, tr := newTree(t)
			before := snapshot(t, fx)
			fx.tick()
			op, on := tc.from(tr)
			np, nn := tc.to(tr)
			wantErrno(t, fx.ns.Rename(op, on, np, nn, tc.flags, nil), tc.want)
			if after := snapshot(t, fx); after != before {
				t.Errorf("failed rename changed the tree:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshot describes every entry and inode, to compare trees.
func snapshot(t *testing.T, f *fixture) string {
	t.Helper()
	var b strings.Builder
	err := f.db.View(func(tx *meta.Tx) error {
		if err := tx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
			fmt.Fprintf(&b, "%d/%s=%d ", parent, name, child)
			return nil
		}); err != nil {
			return err
		}
		return tx.ForEachInode(func(n *meta.Inode) error {
			fmt.Fprintf(&b, "%+v ", *n)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenameOverFile(t *testing.T) {
	for _, targetOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("target open %v", targetOpen), func(t *testing.T) {
			fx, tr := newTree(t)
			var isOpen func(meta.Ino) bool
			if targetOpen {
				isOpen = openSet(tr.bFile)
			}
			at := fx.tick()
			// /a/file over /b/file: across directories.
			if err := fx.ns.Rename(tr.a, "file", tr.b, "file", 0, isOpen); err != nil {
				t.Fatal(err)
			}
			if fx.lookup(tr.a, "file") != 0 || fx.lookup(tr.b, "file") != tr.aFile {
				t.Errorf("after rename: a/file=%d b/file=%d, want 0 and %d",
					fx.lookup(tr.a, "file"), fx.lookup(tr.b, "file"), tr.aFile)
			}
			fx.wantTouched(tr.a, at)
			fx.wantTouched(tr.b, at)
			if got := fx.inode(tr.aFile).Ctime; got != at {
				t.Errorf("moved file ctime %d, want %d", got, at)
			}
			fx.wantNlink(tr.a, 3) // files move no ".."
			fx.wantNlink(tr.b, 2)
			if targetOpen {
				if fx.inode(tr.bFile).Nlink != 0 || !slices.Equal(fx.orphans(), []meta.Ino{tr.bFile}) {
					t.Errorf("open target: nlink %d orphans %v", fx.inode(tr.bFile).Nlink, fx.orphans())
				}
				if len(fx.dropped) != 0 {
					t.Errorf("open target dropped: %v", fx.dropped)
				}
			} else {
				fx.wantGone(tr.bFile)
				if !slices.Equal(fx.dropped, []meta.Ino{tr.bFile}) {
					t.Errorf("dropped %v, want [%d]", fx.dropped, tr.bFile)
				}
			}
		})
	}
}

// Over a file that has another name, the target keeps its other name.
func TestRenameOverLinkedFile(t *testing.T) {
	fx, tr := newTree(t)
	at := fx.tick()
	if err := fx.ns.Rename(meta.RootIno, "g", meta.RootIno, "h", 0, nil); err != nil {
		t.Fatal(err)
	}
	n := fx.inode(tr.f)
	if n.Nlink != 1 || n.Ctime != at {
		t.Errorf("replaced file with another name: nlink %d ctime %d, want 1 and %d", n.Nlink, n.Ctime, at)
	}
	if fx.lookup(meta.RootIno, "h") != tr.g || fx.lookup(meta.RootIno, "f") != tr.f {
		t.Error("names wrong after rename over a hard link")
	}
	if len(fx.dropped) != 0 {
		t.Errorf("dropped %v", fx.dropped)
	}
}

func TestRenameDirectory(t *testing.T) {
	t.Run("over empty directory", func(t *testing.T) {
		fx, tr := newTree(t)
		at := fx.tick()
		// /a/sub replaces /empty: root loses empty's ".." and gains sub's.
		if err := fx.ns.Rename(tr.a, "sub", meta.RootIno, "empty", 0, nil); err != nil {
			t.Fatal(err)
		}
		fx.wantGone(tr.empty)
		if fx.lookup(meta.RootIno, "empty") != tr.sub || fx.lookup(tr.a, "sub") != 0 {
			t.Error("names wrong after directory rename")
		}
		fx.wantNlink(meta.RootIno, 6) // a, b, empty(=sub), full + 2
		fx.wantNlink(tr.a, 2)
		fx.wantNlink(tr.sub, 3)
		fx.wantTouched(meta.RootIno, at)
		fx.wantTouched(tr.a, at)
		if got := fx.inode(tr.sub).Ctime; got != at {
			t.Errorf("moved directory ctime %d, want %d", got, at)
		}
		// The moved subtree is reachable under its new name.
		if fx.lookup(tr.sub, "deep") != tr.deep {
			t.Error("deep lost in the move")
		}
		if p, err := fx.ns.PathOf(tr.deep); err != nil || p != "empty/deep" {
			t.Errorf("PathOf(deep) = %q, %v; want empty/deep", p, err)
		}
	})
	t.Run("to a new name in another directory", func(t *testing.T) {
		fx, tr := newTree(t)
		if err := fx.ns.Rename(tr.a, "sub", tr.b, "moved", namespace.RenameNoReplace, nil); err != nil {
			t.Fatal(err)
		}
		fx.wantNlink(tr.a, 2)
		fx.wantNlink(tr.b, 3)
		fx.wantNlink(meta.RootIno, 6)
	})
	t.Run("in the same directory", func(t *testing.T) {
		fx, tr := newTree(t)
		if err := fx.ns.Rename(meta.RootIno, "a", meta.RootIno, "a2", 0, nil); err != nil {
			t.Fatal(err)
		}
		fx.wantNlink(meta.RootIno, 6)
		fx.wantNlink(tr.a, 3)
	})
	t.Run("up into an ancestor", func(t *testing.T) {
		// Moving deep up is not moving a directory into its subtree.
		fx, tr := newTree(t)
		if err := fx.ns.Rename(tr.sub, "deep", meta.RootIno, "deep", 0, nil); err != nil {
			t.Fatal(err)
		}
		fx.wantNlink(tr.sub, 2)
		fx.wantNlink(meta.RootIno, 7)
	})
	t.Run("over an open empty directory", func(t *testing.T) {
		fx, tr := newTree(t)
		if err := fx.ns.Rename(tr.a, "sub", meta.RootIno, "empty", 0, openSet(tr.empty)); err != nil {
			t.Fatal(err)
		}
		fx.wantNlink(tr.empty, 0)
		if !slices.Equal(fx.orphans(), []meta.Ino{tr.empty}) {
			t.Errorf("orphans %v, want [%d]", fx.orphans(), tr.empty)
		}
		if err := fx.ns.Forget(tr.empty); err != nil {
			t.Fatal(err)
		}
		fx.wantGone(tr.empty)
	})
}

func TestRenameExchange(t *testing.T) {
	t.Run("two files", func(t *testing.T) {
		fx, tr := newTree(t)
		at := fx.tick()
		if err := fx.ns.Rename(tr.a, "file", tr.b, "file", namespace.RenameExchange, nil); err != nil {
			t.Fatal(err)
		}
		if fx.lookup(tr.a, "file") != tr.bFile || fx.lookup(tr.b, "file") != tr.aFile {
			t.Error("files not exchanged")
		}
		fx.wantTouched(tr.a, at)
		fx.wantTouched(tr.b, at)
		fx.wantNlink(tr.aFile, 1)
		fx.wantNlink(tr.bFile, 1)
		// Both files changed their entry: their ctime moves, not their
		// mtime (ext4 and tmpfs do the same).
		for _, ino := range []meta.Ino{tr.aFile, tr.bFile} {
			if n := fx.inode(ino); n.Ctime != at || n.Mtime == at {
				t.Errorf("inode %d after the exchange: ctime %d, mtime %d; want ctime %d and mtime unchanged", ino, n.Ctime, n.Mtime, at)
			}
		}
		if len(fx.dropped) != 0 {
			t.Errorf("exchange dropped %v", fx.dropped)
		}
	})
	t.Run("file and directory across directories", func(t *testing.T) {
		fx, tr := newTree(t)
		at := fx.tick()
		// /a/sub (a directory) and /b/file swap places: a loses a
		// subdirectory, b gains one.
		if err := fx.ns.Rename(tr.a, "sub", tr.b, "file", namespace.RenameExchange, nil); err != nil {
			t.Fatal(err)
		}
		if fx.lookup(tr.a, "sub") != tr.bFile || fx.lookup(tr.b, "file") != tr.sub {
			t.Error("not exchanged")
		}
		fx.wantNlink(tr.a, 2)
		fx.wantNlink(tr.b, 3)
		fx.wantNlink(tr.sub, 3)
		fx.wantNlink(tr.bFile, 1)
		fx.wantTouched(tr.a, at)
		fx.wantTouched(tr.b, at)
		if p, err := fx.ns.PathOf(tr.deep); err != nil || p != "b/file/deep" {
			t.Errorf("PathOf(deep) = %q, %v; want b/file/deep", p, err)
		}
	})
	t.Run("two directories in one directory", func(t *testing.T) {
		fx, tr := newTree(t)
		if err := fx.ns.Rename(meta.RootIno, "empty", meta.RootIno, "full", namespace.RenameExchange, nil); err != nil {
			t.Fatal(err)
		}
		if fx.lookup(meta.RootIno, "empty") != tr.full || fx.lookup(meta.RootIno, "full") != tr.empty {
			t.Error("not exchanged")
		}
		fx.wantNlink(meta.RootIno, 6)
	})
}

// Renaming a name onto itself, or onto another name of the same file, does
// nothing (POSIX).
func TestRenameSameFile(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		{"same name", "f", "f"},
		{"same directory name", "a", "a"},
		{"other name of the same file", "f", "h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, tr := newTree(t)
			before := snapshot(t, fx)
			fx.tick()
			if err := fx.ns.Rename(meta.RootIno, tc.from, meta.RootIno, tc.to, 0, nil); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, fx); after != before {
				t.Errorf("rename onto the same file changed the tree:\nbefore %s\nafter  %s", before, after)
			}
			fx.wantNlink(tr.f, 2)
		})
	}
}

func TestSetAttrAndXattr(t *testing.T) {
	f := newFixture(t)
	file := f.create(meta.RootIno, "f", fileMode)
	at := f.tick()
	n, err := f.ns.SetAttr(file.Ino, func(n *meta.Inode) error { n.Mode = n.Mode&^0o777 | 0o600; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n.Mode != syscall.S_IFREG|0o600 || n.Ctime != at {
		t.Errorf("setattr: mode %o ctime %d, want %o and %d", n.Mode, n.Ctime, syscall.S_IFREG|0o600, at)
	}
	// fn's error aborts the change.
	boom := errors.New("boom")
	if _, err := f.ns.SetAttr(file.Ino, func(n *meta.Inode) error { n.Uid = 7; return boom }); !errors.Is(err, boom) {
		t.Errorf("setattr with failing fn: %v", err)
	}
	if f.inode(file.Ino).Uid != 0 {
		t.Error("failed setattr was written")
	}
	if _, err := f.ns.SetAttr(9999, func(*meta.Inode) error { return nil }); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("setattr of missing inode: %v", err)
	}

	if err := f.ns.SetXattr(file.Ino, "user.k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, ok := f.ns.Xattr(file.Ino, "user.k"); !ok || string(v) != "v" {
		t.Errorf("xattr = %q, %v", v, ok)
	}
	if got := f.ns.ListXattr(file.Ino); !slices.Equal(got, []string{"user.k"}) {
		t.Errorf("listxattr = %v", got)
	}
	if err := f.ns.RemoveXattr(file.Ino, "user.k"); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, f.ns.RemoveXattr(file.Ino, "user.k"), syscall.ENODATA)
	wantErrno(t, f.ns.SetXattr(9999, "user.k", nil), syscall.ENOENT)
}

func TestLookupAndReadDir(t *testing.T) {
	f := newFixture(t)
	d := f.create(meta.RootIno, "d", dirMode)
	for _, name := range []string{"c", "a", "b"} {
		f.create(d.Ino, name, fileMode)
	}
	ents, err := f.ns.ReadDir(d.Ino)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
		if namespace.IsDir(&e.Inode) || e.Inode.Nlink != 1 {
			t.Errorf("entry %s: %+v", e.Name, e.Inode)
		}
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("readdir names %v, want [a b c]", names)
	}
	// A name no file may have is "too long", not "absent".
	_, err = f.ns.Lookup(d.Ino, strings.Repeat("x", namespace.MaxNameLen+1))
	wantErrno(t, err, syscall.ENAMETOOLONG)
	_, err = f.ns.Lookup(d.Ino, "zz")
	wantErrno(t, err, syscall.ENOENT)
	if _, err := f.ns.PathOf(9999); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("PathOf(missing) = %v, want ENOENT", err)
	}
}

// Paths names every inode as PathOf does, one scan for all of them; a hard
// link's inode gets its first entry in key order.
func TestPathsMatchPathOf(t *testing.T) {
	fx, tr := newTree(t)
	var paths map[meta.Ino]string
	err := fx.db.View(func(tx *meta.Tx) (err error) {
		paths, err = namespace.Paths(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[meta.Ino]string{meta.RootIno: "", tr.a: "a", tr.sub: "a/sub", tr.deep: "a/sub/deep",
		tr.aFile: "a/file", tr.b: "b", tr.bFile: "b/file", tr.empty: "empty", tr.full: "full",
		tr.x: "full/x", tr.f: "f", tr.g: "g"}
	if len(paths) != len(want) {
		t.Errorf("Paths: %d inodes, want %d: %v", len(paths), len(want), paths)
	}
	for ino, p := range want {
		if paths[ino] != p {
			t.Errorf("Paths[%d] = %q, want %q", ino, paths[ino], p)
		}
		if ino == meta.RootIno {
			continue
		}
		if got, err := fx.ns.PathOf(ino); err != nil || got != p {
			t.Errorf("PathOf(%d) = %q, %v; want %q", ino, got, err, p)
		}
	}
}

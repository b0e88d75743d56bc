package staging_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/staging"
)

func openDir(t *testing.T, path string) *staging.Dir {
	t.Helper()
	d, err := staging.OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func create(t *testing.T, d *staging.Dir, ino uint64) *staging.File {
	t.Helper()
	f, err := d.Create(ino)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func list(t *testing.T, d *staging.Dir) []staging.Entry {
	t.Helper()
	es, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// seqOf reads the sequence number out of a staging file's name.
func seqOf(t *testing.T, path string) uint64 {
	t.Helper()
	stem, _, _ := strings.Cut(filepath.Base(path), ".")
	_, s, ok := strings.Cut(stem, "-")
	seq, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil {
		t.Fatalf("staging file name %q has no sequence number", path)
	}
	return seq
}

func TestOpenDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store", staging.Name)
	d := openDir(t, path)
	if d.Path() != path {
		t.Errorf("Path() = %q, want %q", d.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Staging files hold users' data: only the daemon's user may enter.
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("staging directory mode %v, want drwx------", fi.Mode())
	}
	if es := list(t, d); len(es) != 0 {
		t.Errorf("new directory lists %v", es)
	}
	// A file where the directory should be is an error, not a crash.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := staging.OpenDir(notDir); err == nil {
		t.Error("OpenDir on a regular file succeeded")
	}
}

func TestLifecycle(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), staging.Name))
	f := create(t, d, 42)
	if f.Ino != 42 || f.State() != staging.Open {
		t.Errorf("new file: ino %d state %q, want 42 open", f.Ino, f.State())
	}
	if dir, name := filepath.Split(f.Path()); filepath.Clean(dir) != d.Path() || !strings.HasPrefix(name, "42-") || !strings.HasSuffix(name, ".open") {
		t.Errorf("new file path %q, want %s/42-<seq>.open", f.Path(), d.Path())
	}
	if !exists(f.Path()) {
		t.Fatalf("%s not on disk", f.Path())
	}
	if fi, err := os.Stat(f.Path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("staging file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := f.WriteAt([]byte("checkpoint"), 0); err != nil {
		t.Fatal(err)
	}

	// Each Mark is a rename: one name at a time, content and open handle
	// kept.
	prev := f.Path()
	for _, s := range []staging.State{staging.Closed, staging.Done} {
		if err := f.Mark(s); err != nil {
			t.Fatalf("mark %s: %v", s, err)
		}
		if f.State() != s || !strings.HasSuffix(f.Path(), "."+string(s)) {
			t.Errorf("after mark %s: state %q path %q", s, f.State(), f.Path())
		}
		if exists(prev) || !exists(f.Path()) {
			t.Errorf("after mark %s: old name there %v, new name there %v", s, exists(prev), exists(f.Path()))
		}
		if seqOf(t, f.Path()) != seqOf(t, prev) {
			t.Errorf("mark %s changed the sequence number: %s -> %s", s, prev, f.Path())
		}
		got, err := os.ReadFile(f.Path())
		if err != nil || string(got) != "checkpoint" {
			t.Errorf("after mark %s: content %q, %v", s, got, err)
		}
		prev = f.Path()
	}
	// Marking the state it is in does nothing.
	if err := f.Mark(staging.Done); err != nil || f.Path() != prev || !exists(prev) {
		t.Errorf("mark done twice: %v, path %q", err, f.Path())
	}
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "checkpoint" {
		t.Errorf("handle after renames reads %q, %v", buf, err)
	}

	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(prev) {
		t.Errorf("%s still there after Remove", prev)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after Remove: %v, want the file closed", err)
	}
	if es := list(t, d); len(es) != 0 {
		t.Errorf("directory lists %v after Remove", es)
	}
}

// A file already gone (recovery removed it) is no error for Remove; a
// Mark of a file whose name is gone fails and leaves the state alone.
func TestGoneUnderneath(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), staging.Name))
	f := create(t, d, 1)
	if err := os.Remove(f.Path()); err != nil {
		t.Fatal(err)
	}
	if err := f.Mark(staging.Closed); err == nil {
		t.Error("mark of a file with no name succeeded")
	}
	if f.State() != staging.Open {
		t.Errorf("failed mark moved the state to %q", f.State())
	}
	if err := f.Remove(); err != nil {
		t.Errorf("remove of a file already gone: %v", err)
	}
}

// List is the crash-recovery record: it must find every staging file, in
// every state, after a restart, and only those.
func TestListAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), staging.Name)
	d := openDir(t, path)
	open := create(t, d, 7)
	closed := create(t, d, 8)
	done := create(t, d, 9)
	if err := closed.Mark(staging.Closed); err != nil {
		t.Fatal(err)
	}
	if err := done.Mark(staging.Done); err != nil {
		t.Fatal(err)
	}
	// Files that are not staging files are left out.
	for _, junk := range []string{
		"notes.txt", "7.open", "7-1", "x-1.open", "7-y.closed", "-1.open", "7-.open",
		"7-1.opened", "7-1.open.tmp", "7-1.OPEN", ".open", "18446744073709551616-1.open",
	} {
		if err := os.WriteFile(filepath.Join(path, junk), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The daemon dies; the next one opens the directory again.
	d2 := openDir(t, path)
	got := map[uint64]staging.Entry{}
	for _, e := range list(t, d2) {
		if _, dup := got[e.Ino]; dup {
			t.Errorf("inode %d listed twice", e.Ino)
		}
		got[e.Ino] = e
	}
	want := map[uint64]staging.Entry{
		7: {Ino: 7, State: staging.Open, Path: open.Path()},
		8: {Ino: 8, State: staging.Closed, Path: closed.Path()},
		9: {Ino: 9, State: staging.Done, Path: done.Path()},
	}
	if len(got) != len(want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	for ino, w := range want {
		g := got[ino]
		g.Seq = 0 // the name's, checked by TestReopen
		if g != w {
			t.Errorf("inode %d: listed %+v, want %+v", ino, got[ino], w)
		}
	}
}

// A listed file reopens as the same staging file: its content, and a
// name that moves with its state (a save adopted after a restart).
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), staging.Name)
	d := openDir(t, path)
	f := create(t, d, 12)
	if _, err := f.WriteAt([]byte("saved"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Mark(staging.Closed); err != nil {
		t.Fatal(err)
	}
	d2 := openDir(t, path)
	es := list(t, d2)
	if len(es) != 1 {
		t.Fatalf("listed %v, want one file", es)
	}
	g, err := d2.Reopen(es[0])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Path() != f.Path() || g.State() != staging.Closed || g.Ino != 12 {
		t.Errorf("reopened as %s (%s, inode %d), want %s", g.Path(), g.State(), g.Ino, f.Path())
	}
	b := make([]byte, 5)
	if _, err := g.ReadAt(b, 0); err != nil || string(b) != "saved" {
		t.Errorf("reopened content %q, %v", b, err)
	}
	if err := g.Mark(staging.Open); err != nil {
		t.Fatal(err)
	}
	if es := list(t, d2); len(es) != 1 || es[0].State != staging.Open || es[0].Path != g.Path() {
		t.Errorf("after Mark: listed %v, want %s", es, g.Path())
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Reopen(es[0]); err == nil {
		t.Error("reopened a removed staging file")
	}
}

// Recovery ingests the closed files of an inode in List order, the last
// one winning: List must give one inode's saves oldest first.
func TestListOrdersSavesOfAnInode(t *testing.T) {
	path := filepath.Join(t.TempDir(), staging.Name)
	var made []string
	for range 2 { // two daemon lifetimes
		d := openDir(t, path)
		for range 3 {
			f := create(t, d, 5)
			if err := f.Mark(staging.Closed); err != nil {
				t.Fatal(err)
			}
			made = append(made, f.Path())
		}
	}
	var listed []string
	for _, e := range list(t, openDir(t, path)) {
		listed = append(listed, e.Path)
	}
	if !slices.Equal(listed, made) {
		t.Errorf("listed\n%v\nwant creation order\n%v", listed, made)
	}
}

// Sequence numbers never repeat, within a Dir or across re-opens of the
// same directory (a restart), so a new save never takes an old one's name.
func TestSequenceUniqueAcrossReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), staging.Name)
	seen := map[uint64]string{}
	var last uint64
	for round := range 3 {
		d := openDir(t, path)
		for i := range 50 {
			f := create(t, d, 1)
			seq := seqOf(t, f.Path())
			if other, dup := seen[seq]; dup {
				t.Fatalf("round %d file %d: sequence %d already used by %s", round, i, seq, other)
			}
			if seq <= last {
				t.Errorf("round %d file %d: sequence %d not above the previous %d", round, i, seq, last)
			}
			seen[seq], last = f.Path(), seq
			if err := f.Remove(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Create never overwrites a file that has the name it would take.
func TestCreateDoesNotClobber(t *testing.T) {
	path := filepath.Join(t.TempDir(), staging.Name)
	d := openDir(t, path)
	f := create(t, d, 3)
	next := filepath.Join(path, fmt.Sprintf("3-%d.open", seqOf(t, f.Path())+1))
	if err := os.WriteFile(next, []byte("older save"), 0o600); err != nil {
		t.Fatal(err)
	}
	if g, err := d.Create(3); err == nil {
		g.Close()
		t.Fatalf("Create took the name of an existing file: %s", g.Path())
	}
	if b, err := os.ReadFile(next); err != nil || string(b) != "older save" {
		t.Errorf("existing file now %q, %v", b, err)
	}
	// The next Create moves past the taken number.
	g := create(t, d, 3)
	if g.Path() == next {
		t.Errorf("Create reused %s", next)
	}
}

func TestExtents(t *testing.T) {
	const page = 4096
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Data at [0, page) and [1 MiB, 1 MiB+page), a hole between and one
	// at the end.
	data := []struct{ off, n int64 }{{0, page}, {1 << 20, page}}
	for _, d := range data {
		if _, err := f.WriteAt(make([]byte, d.n), d.off); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{1}, d.off); err != nil {
			t.Fatal(err)
		}
	}
	const size = 2 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}

	type run struct{ off, n int64 }
	extents := func(limit int64) []run {
		t.Helper()
		var runs []run
		if err := staging.Extents(f, limit, func(off, n int64) error {
			runs = append(runs, run{off, n})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return runs
	}
	covered := func(runs []run, off, n int64) bool {
		for _, r := range runs {
			if off >= r.off && off+n <= r.off+r.n {
				return true
			}
		}
		return false
	}
	for _, limit := range []int64{size, (1 << 20) + 10, page / 2} {
		runs := extents(limit)
		var end int64
		for _, r := range runs {
			if r.n <= 0 || r.off < end || r.off+r.n > limit {
				t.Errorf("limit %d: run %+v out of order, empty or past the limit (runs %v)", limit, r, runs)
			}
			end = r.off + r.n
		}
		for _, d := range data {
			off, n := d.off, min(d.n, limit-d.off)
			if n > 0 && !covered(runs, off, n) {
				t.Errorf("limit %d: data [%d,%d) not in runs %v", limit, off, off+n, runs)
			}
		}
	}
	// Where the file system knows holes (ext4, tmpfs, xfs), the hole
	// between the two pieces is skipped.
	if runs := extents(size); len(runs) > 1 && covered(runs, 64<<10, page) {
		t.Errorf("runs %v cover the hole at 64 KiB", runs)
	}

	boom := errors.New("boom")
	if err := staging.Extents(f, size, func(int64, int64) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Extents with a failing fn: %v, want boom", err)
	}
	empty, err := os.Create(filepath.Join(t.TempDir(), "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if err := staging.Extents(empty, 0, func(off, n int64) error {
		return fmt.Errorf("run %d+%d in an empty file", off, n)
	}); err != nil {
		t.Error(err)
	}
}

// A closed save opened again to append to is named with its size; List
// reads it back, and ClosedSave cuts the file to that size and makes it
// the closed save it started with (what recovery ingests after a crash
// while the writer appended). Other states pass through it unchanged.
func TestAppending(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), staging.Name))
	f := create(t, d, 9)
	if _, err := f.Write([]byte("closed save\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Mark(staging.Closed); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkAppending(12); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("appended, not closed")); err != nil {
		t.Fatal(err)
	}
	entries := list(t, d)
	if len(entries) != 1 || entries[0].State != staging.Appending || entries[0].Keep != 12 || entries[0].Path != f.Path() {
		t.Fatalf("listed %+v, want one appending entry keeping 12 bytes at %s", entries, f.Path())
	}
	e, err := d.ClosedSave(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.State != staging.Closed {
		t.Fatalf("state %s after ClosedSave, want closed", e.State)
	}
	b, err := os.ReadFile(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "closed save\n" {
		t.Fatalf("closed save holds %q", b)
	}
	if entries = list(t, d); len(entries) != 1 || entries[0] != e {
		t.Fatalf("listed %+v after ClosedSave, want %+v", entries, e)
	}
	if same, err := d.ClosedSave(e); err != nil || same != e {
		t.Fatalf("ClosedSave of a closed entry: %+v, %v", same, err)
	}
	// A name whose size does not parse is no staging file.
	if err := os.WriteFile(filepath.Join(d.Path(), "9-1.append-x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if entries = list(t, d); len(entries) != 1 {
		t.Fatalf("listed %+v, want the bad name skipped", entries)
	}
}

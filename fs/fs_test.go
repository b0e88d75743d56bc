package fs

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests below go through a mount in the test process with the os
// package and system calls, never through the store's API.

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// writePieces creates name and writes data to it in pieces of uneven
// sizes, then closes it.
func writePieces(t *testing.T, name string, data []byte) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // on failure; closed and checked below
	sizes := []int{1, 4095, 4097, 65536, 100_003, 1 << 20}
	for off, i := 0, 0; off < len(data); i++ {
		end := min(len(data), off+sizes[i%len(sizes)])
		if n, err := f.Write(data[off:end]); err != nil || n != end-off {
			t.Fatalf("write %s at %d: %d bytes, %v", name, off, n, err)
		}
		off = end
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

// wantContent fails the test unless name holds exactly want.
func wantContent(t *testing.T, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes, want %d; first difference at byte %d", name, len(got), len(want), i)
	}
}

func wantSize(t *testing.T, name string, want int64) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != want {
		t.Fatalf("%s: size %d, want %d", name, fi.Size(), want)
	}
}

// TestWriteInPiecesReadBack: a file written in pieces of uneven sizes
// reads back byte for byte, whole and at random offsets of a fresh open.
func TestWriteInPiecesReadBack(t *testing.T) {
	m := newTestMount(t)
	data := randomBytes(1, 3<<20+12345)
	name := m.path("pieces.bin")
	writePieces(t, name, data)
	wantSize(t, name, int64(len(data)))
	wantContent(t, name, data)

	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewSource(2))
	buf := make([]byte, 70_000)
	for i := 0; i < 20; i++ {
		off := rng.Int63n(int64(len(data)))
		n, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatalf("ReadAt %d: %v", off, err)
		}
		if want := min(len(buf), len(data)-int(off)); n != want || !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt %d: %d bytes, want %d, or content differs", off, n, want)
		}
	}
}

// TestRewriteInPlace: a committed file opened without O_TRUNC and written
// in the middle keeps the rest; the open handle reads its own write before
// close, and the new content is committed at close.
func TestRewriteInPlace(t *testing.T) {
	m := newTestMount(t)
	name := m.path("model.ckpt")
	data := randomBytes(3, 1<<20)
	writePieces(t, name, data)

	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // on failure; the test closes it and checks the error
	patch := bytes.Repeat([]byte("PATCHED!"), 1000)
	const off = 300_001
	if _, err := f.WriteAt(patch, off); err != nil {
		t.Fatal(err)
	}
	copy(data[off:], patch)
	got := make([]byte, len(patch)+20)
	if _, err := f.ReadAt(got, off-10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[off-10:off-10+len(got)]) {
		t.Fatal("the writing handle does not read back its own write")
	}
	// Writing past the end through the same handle extends the file.
	tail := []byte("tail")
	if _, err := f.WriteAt(tail, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	data = append(data, tail...)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSize(t, name, int64(len(data)))
	wantContent(t, name, data)
}

// TestTruncate: truncate(2) down keeps the prefix, up adds zeros;
// ftruncate on a handle being written does the same; O_TRUNC empties.
func TestTruncate(t *testing.T) {
	m := newTestMount(t)
	name := m.path("t")
	data := randomBytes(4, 100_000)
	writePieces(t, name, data)

	if err := os.Truncate(name, 50_001); err != nil {
		t.Fatal(err)
	}
	wantSize(t, name, 50_001)
	wantContent(t, name, data[:50_001])

	if err := os.Truncate(name, 200_003); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, data[:50_001]...), make([]byte, 150_002)...)
	wantContent(t, name, want)

	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // on failure; the test closes it and checks the error
	if _, err := f.WriteAt([]byte("xyz"), 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(21); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 21 {
		t.Fatalf("fstat after ftruncate: %v, %v; want size 21", fi, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(append(append([]byte{}, data[:10]...), "xyz"...), data[13:21]...)
	wantContent(t, name, want)

	f, err = os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSize(t, name, 0)
	wantContent(t, name, nil)
}

// TestRenameOverExisting: renaming over a file replaces it atomically: the
// target name has the source's content and inode, the source name is gone.
func TestRenameOverExisting(t *testing.T) {
	m := newTestMount(t)
	a, b := m.path("a"), m.path("b")
	writePieces(t, a, []byte("new content"))
	writePieces(t, b, []byte("old content, longer"))
	var st syscall.Stat_t
	if err := syscall.Stat(a, &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	wantContent(t, b, []byte("new content"))
	var st2 syscall.Stat_t
	if err := syscall.Stat(b, &st2); err != nil {
		t.Fatal(err)
	}
	if st2.Ino != st.Ino {
		t.Errorf("b has inode %d after the rename, want a's %d", st2.Ino, st.Ino)
	}
	_, err := os.Stat(a)
	wantErrno(t, "stat of the renamed name", err, syscall.ENOENT)
	names := readNames(t, m.dir)
	if strings.Join(names, ",") != "b" {
		t.Errorf("root lists %v, want [b]", names)
	}
	// RENAME_NOREPLACE refuses an existing target.
	writePieces(t, a, []byte("again"))
	err = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	wantErrno(t, "renameat2 NOREPLACE over an existing file", err, syscall.EEXIST)
	wantContent(t, b, []byte("new content"))
	// RENAME_EXCHANGE swaps the two names.
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	wantContent(t, a, []byte("new content"))
	wantContent(t, b, []byte("again"))
	if names := readNames(t, m.dir); strings.Join(names, ",") != "a,b" {
		t.Errorf("root lists %v after the exchange, want [a b]", names)
	}
}

func readNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func statT(t *testing.T, name string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatalf("stat %s: %v", name, err)
	}
	return st
}

// TestHardLinkUnlink: a hard link shares the inode and counts in nlink;
// unlinking one name leaves the other with the content.
func TestHardLinkUnlink(t *testing.T) {
	m := newTestMount(t)
	a, b := m.path("a"), m.path("b")
	data := randomBytes(5, 10_000)
	writePieces(t, a, data)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	sa, sb := statT(t, a), statT(t, b)
	if sa.Ino != sb.Ino || sa.Nlink != 2 || sb.Nlink != 2 {
		t.Fatalf("after link: ino %d/%d nlink %d/%d, want one inode with nlink 2", sa.Ino, sb.Ino, sa.Nlink, sb.Nlink)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	_, err := os.Stat(a)
	wantErrno(t, "stat of the unlinked name", err, syscall.ENOENT)
	if sb = statT(t, b); sb.Nlink != 1 {
		t.Errorf("nlink %d after unlinking one name, want 1", sb.Nlink)
	}
	wantContent(t, b, data)
	// A write through the remaining name is seen by it alone.
	writePieces(t, b, []byte("rewritten"))
	wantContent(t, b, []byte("rewritten"))
}

// TestUnlinkWhileOpen: an unlinked file lives while a descriptor is open:
// it reads (and, for a writer, writes) through the descriptor, fstat shows
// nlink 0, and the name is gone at once.
func TestUnlinkWhileOpen(t *testing.T) {
	m := newTestMount(t)
	name := m.path("doomed")
	data := randomBytes(6, 300_000)
	writePieces(t, name, data)

	r, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The writer starts while the file has its name; TestUnnamedFiles
	// starts one after the unlink.
	if _, err := w.WriteAt([]byte("before"), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	data = append(data, "before"...)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(name)
	wantErrno(t, "stat after unlink", err, syscall.ENOENT)
	if names := readNames(t, m.dir); len(names) != 0 {
		t.Errorf("root lists %v after unlink, want nothing", names)
	}

	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read through the open descriptor: %d bytes, want the %d written", len(got), len(data))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 || st.Size != int64(len(data)) {
		t.Errorf("fstat of the unlinked file: nlink %d size %d, want 0 and %d", st.Nlink, st.Size, len(data))
	}
	if _, err := w.WriteAt([]byte("still here"), 0); err != nil {
		t.Fatalf("write to the unlinked file: %v", err)
	}
	buf := make([]byte, 10)
	if _, err := w.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
		t.Fatalf("read back from the unlinked file: %q, %v", buf, err)
	}
	if err := w.Sync(); err != nil {
		t.Errorf("fsync of the unlinked file: %v", err)
	}
}

// TestXattr: user attributes are set, read, listed and removed with the
// flags' errors; the computed user.ckptfs.* ones are listed and read-only.
func TestXattr(t *testing.T) {
	m := newTestMount(t)
	name := m.path("x")
	writePieces(t, name, randomBytes(7, 50_000))

	if err := unix.Setxattr(name, "user.note", []byte("epoch 3"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(name, "user.note", buf)
	if err != nil || string(buf[:n]) != "epoch 3" {
		t.Fatalf("getxattr user.note: %q, %v", buf[:n], err)
	}
	_, err = unix.Getxattr(name, "user.note", make([]byte, 3))
	wantErrno(t, "getxattr into a short buffer", err, syscall.ERANGE)
	err = unix.Setxattr(name, "user.note", []byte("x"), unix.XATTR_CREATE)
	wantErrno(t, "setxattr XATTR_CREATE of an existing attribute", err, syscall.EEXIST)
	err = unix.Setxattr(name, "user.absent", []byte("x"), unix.XATTR_REPLACE)
	wantErrno(t, "setxattr XATTR_REPLACE of a missing attribute", err, syscall.ENODATA)
	if err := unix.Setxattr(name, "user.note", []byte("epoch 4"), unix.XATTR_REPLACE); err != nil {
		t.Fatal(err)
	}
	if n, err = unix.Getxattr(name, "user.note", buf); err != nil || string(buf[:n]) != "epoch 4" {
		t.Fatalf("getxattr after replace: %q, %v", buf[:n], err)
	}

	// The computed attributes are read by name, never listed: copying
	// tools (cp -a, rsync -X, tar --xattrs) would copy them out, or fail
	// removing them from a copy into the mount.
	list := listXattr(t, name)
	if !contains(list, "user.note") {
		t.Errorf("listxattr %v lacks user.note", list)
	}
	for _, a := range list {
		if strings.HasPrefix(a, infoPrefix) {
			t.Errorf("listxattr lists the computed attribute %s", a)
		}
	}
	for _, a := range infoNames {
		if _, err := unix.Getxattr(name, infoPrefix+a, make([]byte, 4096)); err != nil {
			t.Errorf("getxattr %s%s: %v", infoPrefix, a, err)
		}
	}
	if n, err = unix.Getxattr(name, "user.ckptfs.version", buf); err != nil {
		t.Fatal(err)
	} else if v, err := strconv.ParseUint(string(buf[:n]), 10, 64); err != nil || v == 0 {
		t.Errorf("user.ckptfs.version = %q, want a version number", buf[:n])
	}
	err = unix.Setxattr(name, "user.ckptfs.codec", []byte("none"), 0)
	wantErrno(t, "setxattr of a computed attribute", err, syscall.EPERM)
	err = unix.Removexattr(name, "user.ckptfs.codec")
	wantErrno(t, "removexattr of a computed attribute", err, syscall.EPERM)

	if err := unix.Removexattr(name, "user.note"); err != nil {
		t.Fatal(err)
	}
	_, err = unix.Getxattr(name, "user.note", buf)
	wantErrno(t, "getxattr after removexattr", err, syscall.ENODATA)
	if contains(listXattr(t, name), "user.note") {
		t.Error("user.note still listed after removexattr")
	}
	err = unix.Removexattr(name, "user.note")
	wantErrno(t, "removexattr of a missing attribute", err, syscall.ENODATA)
}

func listXattr(t *testing.T, name string) []string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(name, buf)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestSymlink: a symlink reads back its target, lstat sees a link, and
// opening it follows it.
func TestSymlink(t *testing.T) {
	m := newTestMount(t)
	writePieces(t, m.path("target"), []byte("pointed at"))
	if err := os.Symlink("target", m.path("link")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(m.path("link")); err != nil || got != "target" {
		t.Fatalf("readlink: %q, %v; want %q", got, err, "target")
	}
	fi, err := os.Lstat(m.path("link"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink == 0 || fi.Size() != int64(len("target")) {
		t.Errorf("lstat: mode %v size %d, want a symlink of size %d", fi.Mode(), fi.Size(), len("target"))
	}
	wantContent(t, m.path("link"), []byte("pointed at"))
	long := strings.Repeat("d/", 500) + "f"
	if err := os.Symlink(long, m.path("long")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(m.path("long")); err != nil || got != long {
		t.Fatalf("readlink of a %d-byte target: %d bytes, %v", len(long), len(got), err)
	}
}

// TestMkdirRmdir: directories nest; rmdir of a non-empty one is ENOTEMPTY,
// of an empty one removes it; mkdir over a name is EEXIST.
func TestMkdirRmdir(t *testing.T) {
	m := newTestMount(t)
	d := m.path("d")
	if err := os.Mkdir(d, 0o750); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("mkdir made mode %v, want a directory with 0750", fi.Mode())
	}
	wantErrno(t, "mkdir over an existing directory", os.Mkdir(d, 0o755), syscall.EEXIST)
	if err := os.MkdirAll(m.path("d", "e", "f"), 0o755); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("d", "e", "f", "file"), []byte("deep"))
	wantContent(t, m.path("d", "e", "f", "file"), []byte("deep"))

	wantErrno(t, "rmdir of a non-empty directory", syscall.Rmdir(m.path("d", "e", "f")), syscall.ENOTEMPTY)
	wantErrno(t, "rmdir of a file", syscall.Rmdir(m.path("d", "e", "f", "file")), syscall.ENOTDIR)
	if err := os.Remove(m.path("d", "e", "f", "file")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(m.path("d", "e", "f")); err != nil {
		t.Fatalf("rmdir of an emptied directory: %v", err)
	}
	_, err = os.Stat(m.path("d", "e", "f"))
	wantErrno(t, "stat of a removed directory", err, syscall.ENOENT)
	if st := statT(t, d); st.Nlink != 3 {
		t.Errorf("d has nlink %d with one subdirectory, want 3", st.Nlink)
	}
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	if names := readNames(t, m.dir); len(names) != 0 {
		t.Errorf("root lists %v, want nothing", names)
	}
}

// TestNameTooLong: names of 256 bytes are refused with ENAMETOOLONG by
// every call that makes a name; 255 bytes are fine.
func TestNameTooLong(t *testing.T) {
	m := newTestMount(t)
	long := m.path(strings.Repeat("n", 256))
	_, err := os.Create(long)
	wantErrno(t, "create with a 256-byte name", err, syscall.ENAMETOOLONG)
	wantErrno(t, "mkdir with a 256-byte name", os.Mkdir(long, 0o755), syscall.ENAMETOOLONG)
	wantErrno(t, "symlink with a 256-byte name", os.Symlink("t", long), syscall.ENAMETOOLONG)
	ok := m.path(strings.Repeat("n", 255))
	writePieces(t, ok, []byte("fits"))
	wantErrno(t, "link to a 256-byte name", os.Link(ok, long), syscall.ENAMETOOLONG)
	wantErrno(t, "rename to a 256-byte name", os.Rename(ok, long), syscall.ENAMETOOLONG)
	wantContent(t, ok, []byte("fits"))
	if names := readNames(t, m.dir); len(names) != 1 || len(names[0]) != 255 {
		t.Errorf("root lists %d names, want the one of 255 bytes", len(names))
	}
}

// TestControlDir: .ckptfs exists at the root, is not listed, holds
// stats.json (a JSON report), and refuses every change.
func TestControlDir(t *testing.T) {
	m := mountStore(t, filepath.Join(t.TempDir(), "store"), true) // the report needs a store directory
	writePieces(t, m.path("f"), []byte("something to report"))
	ctl := m.path(controlDir)
	fi, err := os.Stat(ctl)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o555 {
		t.Errorf("%s: mode %v, want a read-only directory", controlDir, fi.Mode())
	}
	if names := readNames(t, m.dir); strings.Join(names, ",") != "f" {
		t.Errorf("root lists %v, want only f (the control directory is hidden)", names)
	}
	if names := readNames(t, ctl); strings.Join(names, ",") != "drop_caches,stats.json,view" {
		t.Errorf("%s lists %v, want [drop_caches stats.json view]", controlDir, names)
	}
	b, err := os.ReadFile(m.path(controlDir, "stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Files int    `json:"file_count"`
		Codec string `json:"codec"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("stats.json: %v\n%s", err, b)
	}
	if rep.Files != 1 || rep.Codec == "" {
		t.Errorf("stats.json: %d files, codec %q; want 1 file and a codec", rep.Files, rep.Codec)
	}

	_, err = os.OpenFile(m.path(controlDir, "stats.json"), os.O_WRONLY, 0)
	wantErrno(t, "open stats.json for writing", err, syscall.EACCES)
	if err := os.Mkdir(m.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, createErr := os.Create(m.path(controlDir, "new"))
	// want is the error ckptfs itself gives, or nil where the kernel or
	// go-fuse refuses first and any error will do.
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"rmdir .ckptfs", syscall.Rmdir(ctl), syscall.EPERM},
		{"rename .ckptfs", syscall.Rename(ctl, m.path("elsewhere")), syscall.EPERM},
		{"rename a directory over .ckptfs", syscall.Rename(m.path("dir"), ctl), syscall.EPERM},
		{"unlink .ckptfs/stats.json", syscall.Unlink(m.path(controlDir, "stats.json")), syscall.EPERM},
		{"mkdir .ckptfs", syscall.Mkdir(ctl, 0o755), syscall.EEXIST},
		{"rename a file over .ckptfs", syscall.Rename(m.path("f"), ctl), nil},
		{"symlink as .ckptfs", syscall.Symlink("f", ctl), nil},
		{"link as .ckptfs", syscall.Link(m.path("f"), ctl), nil},
		{"create in .ckptfs", createErr, nil},
		{"mkdir in .ckptfs", syscall.Mkdir(m.path(controlDir, "d"), 0o755), nil},
		{"truncate stats.json", syscall.Truncate(m.path(controlDir, "stats.json"), 0), nil},
		{"chmod .ckptfs", syscall.Chmod(ctl, 0o777), nil},
		{"setxattr on .ckptfs", unix.Setxattr(ctl, "user.x", []byte("y"), 0), nil},
	} {
		switch {
		case c.err == nil:
			t.Errorf("%s succeeded, want it refused", c.what)
		case c.want != nil:
			wantErrno(t, c.what, c.err, c.want)
		}
	}
	if fi, err := os.Stat(ctl); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("%s after the refused changes: %v, %v", controlDir, fi, err)
	}
	if names := readNames(t, ctl); strings.Join(names, ",") != "drop_caches,stats.json,view" {
		t.Errorf("%s lists %v after the refused changes, want [drop_caches stats.json view]", controlDir, names)
	}
	if _, err := os.Stat(m.path("elsewhere")); !os.IsNotExist(err) {
		t.Errorf("the control directory was renamed (stat elsewhere: %v)", err)
	}
	wantContent(t, m.path("f"), []byte("something to report"))
}

// TestFsync: fsync of a file being written and of a directory succeed, and
// the synced content is what a fresh open reads.
func TestFsync(t *testing.T) {
	m := newTestMount(t)
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := m.path("d", "f")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := randomBytes(8, 200_000)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync of a file: %v", err)
	}
	wantContent(t, name, data)
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("fdatasync of a file: %v", err)
	}
	for _, dir := range []string{m.path("d"), m.dir} {
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Errorf("fsync of directory %s: %v", dir, err)
		}
		d.Close()
	}
}

// TestRemount: files, directories, symlinks, hard links and xattrs
// survive unmounting, closing the store and mounting it again (the device
// in a file this time).
func TestRemount(t *testing.T) {
	m := mountStore(t, t.TempDir(), false)
	big := randomBytes(9, 2<<20+7)
	if err := os.MkdirAll(m.path("run", "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("run", "ckpt", "epoch1.pt"), big)
	// A second version of the file, so that a delta chain is there too.
	f, err := os.OpenFile(m.path("run", "ckpt", "epoch1.pt"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // on failure; the test closes it and checks the error
	if _, err := f.WriteAt([]byte("v2"), 1000); err != nil {
		t.Fatal(err)
	}
	copy(big[1000:], "v2")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("small"), []byte("small file"))
	if err := os.Link(m.path("small"), m.path("run", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ckpt/epoch1.pt", m.path("run", "latest")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(m.path("small"), "user.tag", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("gone"), []byte("deleted before unmount"))
	if err := os.Remove(m.path("gone")); err != nil {
		t.Fatal(err)
	}

	m = m.remount()
	wantContent(t, m.path("run", "ckpt", "epoch1.pt"), big)
	wantContent(t, m.path("run", "latest"), big)
	wantContent(t, m.path("small"), []byte("small file"))
	if st := statT(t, m.path("run", "hard")); st.Nlink != 2 || st.Ino != statT(t, m.path("small")).Ino {
		t.Errorf("hard link after remount: nlink %d, want 2 and small's inode", st.Nlink)
	}
	if got, err := os.Readlink(m.path("run", "latest")); err != nil || got != "ckpt/epoch1.pt" {
		t.Errorf("readlink after remount: %q, %v", got, err)
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(m.path("small"), "user.tag", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("xattr after remount: %q, %v", buf[:n], err)
	}
	if names := readNames(t, m.dir); strings.Join(names, ",") != "run,small" {
		t.Errorf("root lists %v after remount, want [run small]", names)
	}
}

// TestInfoNamesMatchPython: the Python package reads the computed
// attributes by name (listxattr does not list them), from its own list.
func TestInfoNamesMatchPython(t *testing.T) {
	src, err := os.ReadFile("../python/ckptfs/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "_INFO_NAMES = (")
	tuple, _, ok2 := strings.Cut(rest, ")")
	if !ok || !ok2 {
		t.Fatal("no _INFO_NAMES tuple in python/ckptfs/__init__.py")
	}
	var py []string
	for _, f := range strings.Split(tuple, ",") {
		if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
			py = append(py, f)
		}
	}
	slices.Sort(py)
	goNames := slices.Sorted(slices.Values(infoNames))
	if !slices.Equal(py, goNames) {
		t.Errorf("python/ckptfs _INFO_NAMES %v, fs infoNames %v", py, goNames)
	}
}

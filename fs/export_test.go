package fs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/chain"
)

// exportTree is the handles of d/sub/f.bin, d/sub and d/gone, and their
// inode numbers.
type exportTree struct {
	file, dir, gone          unix.FileHandle
	fileIno, dirIno, goneIno uint64
}

// makeExportTree makes d/sub/f.bin (content) and d/gone and takes their
// handles.
func makeExportTree(t *testing.T, m *testMount, content []byte) exportTree {
	t.Helper()
	if err := os.MkdirAll(m.path("d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("d", "sub", "f.bin"), content)
	writePieces(t, m.path("d", "gone"), []byte("deleted before its handle is used"))
	var tr exportTree
	tr.file, tr.fileIno = nameToHandle(t, m.path("d", "sub", "f.bin"))
	tr.dir, tr.dirIno = nameToHandle(t, m.path("d", "sub"))
	tr.gone, tr.goneIno = nameToHandle(t, m.path("d", "gone"))
	return tr
}

func nameToHandle(t *testing.T, name string) (unix.FileHandle, uint64) {
	t.Helper()
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, name, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", name, err)
	}
	return h, statT(t, name).Ino
}

// openByHandle opens h on m's mount (CAP_DAC_READ_SEARCH: the tests run as
// root, as FUSE mounts in process need).
func openByHandle(t *testing.T, m *testMount, h unix.FileHandle, flags int) (*os.File, error) {
	t.Helper()
	mnt, err := os.Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer mnt.Close()
	fd, err := unix.OpenByHandleAt(int(mnt.Fd()), h, flags)
	if errors.Is(err, syscall.EPERM) {
		requireDeps(t, "open_by_handle_at (CAP_DAC_READ_SEARCH)", err)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "handle"), nil
}

// forgetInodes has the kernel drop its unused dentries and inodes (echo 2
// > /proc/sys/vm/drop_caches) until the filesystem has been told to forget
// every one of inos, so that a handle of one can only be resolved by its
// number.
func forgetInodes(t *testing.T, m *testMount, inos ...uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			requireDeps(t, "writing /proc/sys/vm/drop_caches", err)
		}
		var held []uint64
		for _, ino := range inos {
			if m.fsys.open.inUse(chain.Ino(ino)) {
				held = append(held, ino)
			}
		}
		if len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("inodes %v still referenced by the kernel after drop_caches", held)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkFileHandle opens the file's handle and wants its inode and content.
func checkFileHandle(t *testing.T, m *testMount, h unix.FileHandle, ino uint64, want []byte) {
	t.Helper()
	f, err := openByHandle(t, m, h, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("open_by_handle_at of a file: %v", err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Ino != ino {
		t.Errorf("file opened by handle: inode %d (%v), want %d", st.Ino, err, ino)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read of a file opened by handle: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("file opened by handle: %d bytes, not the %d written", len(got), len(want))
	}
}

// checkDirHandle opens the directory's handle: the kernel reconnects it to
// the tree (LookupParent, up to the root), so its path is the real one.
func checkDirHandle(t *testing.T, m *testMount, h unix.FileHandle, ino uint64, wantPath string, wantNames []string) {
	t.Helper()
	d, err := openByHandle(t, m, h, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		t.Fatalf("open_by_handle_at of a directory: %v", err)
	}
	defer d.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(d.Fd()), &st); err != nil || st.Ino != ino {
		t.Errorf("directory opened by handle: inode %d (%v), want %d", st.Ino, err, ino)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatalf("readdir of a directory opened by handle: %v", err)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(wantNames, ",") {
		t.Errorf("directory opened by handle lists %v, want %v", names, wantNames)
	}
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(d.Fd()))); err != nil || p != wantPath {
		t.Errorf("directory opened by handle is at %q (%v), want %q", p, err, wantPath)
	}
}

// TestExportHandleAfterForget: handles of a file and of a directory (two
// levels down, so that reconnecting it passes a directory that is not the
// root) open the same inode after the kernel forgot it (generic/426,
// 467); a handle of a deleted file is ESTALE.
func TestExportHandleAfterForget(t *testing.T) {
	m := newTestMount(t)
	content := randomBytes(41, 600<<10+3)
	tr := makeExportTree(t, m, content)
	if err := os.Remove(m.path("d", "gone")); err != nil {
		t.Fatal(err)
	}
	forgetInodes(t, m, tr.fileIno, tr.dirIno, tr.goneIno)
	checkFileHandle(t, m, tr.file, tr.fileIno, content)
	forgetInodes(t, m, tr.fileIno, tr.dirIno)
	checkDirHandle(t, m, tr.dir, tr.dirIno, m.path("d", "sub"), []string{"f.bin"})
	if f, err := openByHandle(t, m, tr.gone, unix.O_RDONLY); !errors.Is(err, syscall.ESTALE) {
		if f != nil {
			f.Close()
		}
		t.Errorf("open_by_handle_at of a deleted file: %v, want ESTALE", err)
	}
}

// TestExportHandleAfterRemount: inode numbers are the store's, so handles
// taken on one mount open the same files on a later mount of the store
// (generic/756, 777); a file deleted in between is ESTALE.
func TestExportHandleAfterRemount(t *testing.T) {
	m := mountStore(t, t.TempDir(), false)
	content := randomBytes(42, 1<<20+17)
	tr := makeExportTree(t, m, content)
	if err := os.Remove(m.path("d", "gone")); err != nil {
		t.Fatal(err)
	}
	m = m.remount()
	checkFileHandle(t, m, tr.file, tr.fileIno, content)
	checkDirHandle(t, m, tr.dir, tr.dirIno, m.path("d", "sub"), []string{"f.bin"})
	if f, err := openByHandle(t, m, tr.gone, unix.O_RDONLY); !errors.Is(err, syscall.ESTALE) {
		if f != nil {
			f.Close()
		}
		t.Errorf("open_by_handle_at after a remount of a file deleted before it: %v, want ESTALE", err)
	}
}

// atHandleConnectable asks name_to_handle_at for a handle that names the
// file's parent too (Linux 6.13, include/uapi/linux/fcntl.h), which
// open_by_handle_at reconnects to its path.
const atHandleConnectable = 0x002

// TestExportConnectableHandle: a connectable handle of a file opens it, on
// a later mount of the store, at its path: the kernel resolves the parent
// by number, connects it to the root (LookupParent), then finds the file's
// name in it.
func TestExportConnectableHandle(t *testing.T) {
	m := mountStore(t, t.TempDir(), false)
	content := randomBytes(45, 300<<10)
	makeExportTree(t, m, content)
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, m.path("d", "sub", "f.bin"), atHandleConnectable)
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("kernel without connectable file handles: %v", err)
	}
	if err != nil {
		t.Fatalf("name_to_handle_at (connectable): %v", err)
	}
	m = m.remount()
	f, err := openByHandle(t, m, h, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("open_by_handle_at of a connectable handle: %v", err)
	}
	defer f.Close()
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err != nil || p != m.path("d", "sub", "f.bin") {
		t.Errorf("file opened by a connectable handle is at %q (%v), want %q", p, err, m.path("d", "sub", "f.bin"))
	}
	if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, content) {
		t.Errorf("file opened by a connectable handle: %d bytes (%v), not the %d written", len(got), err, len(content))
	}
}

// TestExportHandleWrite: a file opened for writing by handle, with no path
// the kernel knows, is saved under its name's series, not as a file with
// no name: the store knows its name.
func TestExportHandleWrite(t *testing.T) {
	m := newTestMount(t)
	tr := makeExportTree(t, m, randomBytes(43, 100<<10))
	forgetInodes(t, m, tr.fileIno)
	f, err := openByHandle(t, m, tr.file, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		t.Fatalf("open_by_handle_at for writing: %v", err)
	}
	defer f.Close() // on failure; closed and checked below
	next := randomBytes(44, 200<<10)
	if _, err := f.Write(next); err != nil {
		t.Fatalf("write to a file opened by handle: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of a file opened by handle: %v", err)
	}
	m.fsys.Drain()
	wantContent(t, m.path("d", "sub", "f.bin"), next)
	info, err := m.store.Info(chain.Ino(tr.fileIno))
	if err != nil {
		t.Fatal(err)
	}
	if want := chain.FamilyOf("d/sub/f.bin"); info.Family != want {
		t.Errorf("saved through a handle into family %q, want %q", info.Family, want)
	}
}

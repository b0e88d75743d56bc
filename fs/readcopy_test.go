package fs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"golang.org/x/sys/unix"
)

// copyMount mounts a fresh store on the simulated SSD (a device file, so
// that it can be mounted again), with setup applied to the filesystem.
func copyMount(t *testing.T, storeDir string, setup func(*FS)) *testMount {
	t.Helper()
	return mountStoreSet(t, storeDir, false, MountOptions{}, func(m *testMount) { m.setup = setup })
}

// report is the store's report now.
func (m *testMount) report() *storedir.Report {
	m.t.Helper()
	rep, err := m.ds.Report(storedir.ReportOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	return rep
}

// doneFiles is the number of staging files kept only as backing files.
func (m *testMount) doneFiles() int { return m.doneFilesOf(0) }

// doneFilesOf is doneFiles of inode ino (0: of every inode).
func (m *testMount) doneFilesOf(ino uint64) int {
	m.t.Helper()
	n := 0
	for _, e := range m.stagingList() {
		if e.State == staging.Done && (ino == 0 || e.Ino == ino) {
			n++
		}
	}
	return n
}

// readFrom reads all of f from its start.
func readFrom(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadCopy: a reader of a committed file gets a read copy, made once:
// a second reader, and a mapping, read it without a chunk rebuilt; a
// writer takes it over, and the readers see its writes as on any
// filesystem; the copy goes once no handle uses it, before the dirty
// expiry, and the device is charged nothing for it.
func TestReadCopy(t *testing.T) {
	if !kernelPassthrough(t) {
		return
	}
	storeDir := filepath.Join(t.TempDir(), "store")
	m := copyMount(t, storeDir, nil)
	data := randomBytes(5, 3<<20+1234)
	writePieces(t, m.path("ckpt.bin"), data)
	m.stop()
	// A new mount: no staging file of the save is left to read from.
	m = copyMount(t, storeDir, func(f *FS) { f.dirtyExpire = 3 * time.Second })

	f1, err := os.Open(m.path("ckpt.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	if copies, size := m.fsys.ReadCopies(); copies != 1 || size != int64(len(data)) {
		t.Fatalf("after the first open: %d read copies of %d bytes, want 1 of %d", copies, size, len(data))
	}
	rebuilt := m.report().ChunksRebuilt
	if rebuilt == 0 {
		t.Errorf("the copy rebuilt no chunk")
	}
	if got := readFrom(t, f1); !bytes.Equal(got, data) {
		t.Fatalf("read through the copy: %d bytes, differ from the %d saved", len(got), len(data))
	}
	f2, err := os.Open(m.path("ckpt.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if got := readFrom(t, f2); !bytes.Equal(got, data) {
		t.Fatalf("second reader: %d bytes, differ", len(got))
	}
	mapped, err := unix.Mmap(int(f2.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mapped, data) {
		t.Errorf("a mapping of the copy differs from the save")
	}
	unix.Munmap(mapped)
	if copies, _ := m.fsys.ReadCopies(); copies != 1 {
		t.Errorf("%d read copies after a second reader, want 1", copies)
	}
	if again := m.report().ChunksRebuilt; again != rebuilt {
		t.Errorf("reads from the copy rebuilt %d chunks, want none", again-rebuilt)
	}

	// A writer, while the readers hold the copy.
	w, err := os.OpenFile(m.path("ckpt.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte("written while read")
	if _, err := w.WriteAt(patch, 1<<20); err != nil {
		t.Fatal(err)
	}
	copy(data[1<<20:], patch)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFrom(t, f1); !bytes.Equal(got, data) {
		t.Errorf("a reader after a write: its bytes differ from the written file")
	}
	f1.Close()
	f2.Close()
	m.fsys.Drain()
	wantContent(t, m.path("ckpt.bin"), data)

	// Unused, the copy (the writer's staging file since) goes, uncharged.
	deadline := time.Now().Add(10 * time.Second)
	for m.doneFiles() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := m.doneFiles(); n != 0 {
		t.Errorf("%d copies left 10 s after the last reader closed", n)
	}
	if p := m.report().StagedPages; p != 0 {
		t.Errorf("%d staged pages charged: the copies went before the dirty expiry", p)
	}
	m = m.remount()
	wantContent(t, m.path("ckpt.bin"), data)
}

// TestReadCopyCharged: a copy a reader holds past the dirty expiry is
// charged to the device once, as the host would write it back; one the
// background limit leaves no room for is not made; an unused one is
// deleted when a save needs its room.
func TestReadCopyCharged(t *testing.T) {
	if !kernelPassthrough(t) {
		return
	}
	const size = 2 << 20
	storeDir := filepath.Join(t.TempDir(), "store")
	m := copyMount(t, storeDir, nil)
	writePieces(t, m.path("a.bin"), randomBytes(6, size))
	m.stop()

	m = copyMount(t, storeDir, func(f *FS) { f.dirtyExpire = 300 * time.Millisecond })
	f, err := os.Open(m.path("a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if copies, _ := m.fsys.ReadCopies(); copies != 1 {
		t.Fatalf("%d read copies, want 1", copies)
	}
	time.Sleep(time.Second)
	if _, err := io.Copy(io.Discard, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for m.doneFiles() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := m.report().StagedPages; p != size/pageSize {
		t.Errorf("a copy held past the expiry: %d staged pages charged, want %d", p, size/pageSize)
	}
	m.stop()

	m = copyMount(t, storeDir, func(f *FS) { f.dirtyLimit = size })
	if _, err := os.ReadFile(m.path("a.bin")); err != nil {
		t.Fatal(err)
	}
	if copies, _ := m.fsys.ReadCopies(); copies != 0 {
		t.Errorf("%d read copies past half the background limit, want 0", copies)
	}
	m.stop()

	// A save that the copy would push past the limit deletes the copy,
	// unused, instead of having the host write either.
	m = copyMount(t, storeDir, func(f *FS) { f.dirtyLimit = 2 * size })
	if _, err := os.ReadFile(m.path("a.bin")); err != nil {
		t.Fatal(err)
	}
	if copies, _ := m.fsys.ReadCopies(); copies != 1 || m.doneFiles() != 1 {
		t.Fatalf("%d read copies, %d kept; want 1", copies, m.doneFiles())
	}
	time.Sleep(backingLinger)
	writePieces(t, m.path("b.bin"), randomBytes(9, size*3/2))
	m.fsys.Drain()
	if n, p := m.doneFilesOf(statT(t, m.path("a.bin")).Ino), m.report().StagedPages; n != 0 || p != 0 {
		t.Errorf("a save past the limit: %d copies left, %d staged pages charged; want the copy deleted, nothing charged", n, p)
	}
}

// TestNoReadCopy: no copy for a reader with O_DIRECT, of a file under
// ReadCopyMin, or with NoReadCopies; each reads the file right.
func TestNoReadCopy(t *testing.T) {
	if !kernelPassthrough(t) {
		return
	}
	storeDir := filepath.Join(t.TempDir(), "store")
	m := copyMount(t, storeDir, nil)
	big, small := randomBytes(7, 2<<20), randomBytes(8, 300<<10)
	writePieces(t, m.path("big.bin"), big)
	writePieces(t, m.path("small.bin"), small)
	m.stop()

	m = copyMount(t, storeDir, nil)
	wantContent(t, m.path("small.bin"), small)
	f, err := os.OpenFile(m.path("big.bin"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	aligned := alignedBuf(1 << 20)
	if _, err := f.ReadAt(aligned, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(aligned, big[:1<<20]) {
		t.Errorf("O_DIRECT read differs")
	}
	if copies, _ := m.fsys.ReadCopies(); copies != 0 {
		t.Errorf("%d read copies for a small file and an O_DIRECT reader, want 0", copies)
	}
	m.stop()

	m = copyMount(t, storeDir, func(f *FS) { f.NoReadCopies = true })
	wantContent(t, m.path("big.bin"), big)
	if copies, _ := m.fsys.ReadCopies(); copies != 0 {
		t.Errorf("%d read copies with NoReadCopies, want 0", copies)
	}
}

// kernelPassthrough reports whether this kernel serves passthrough handles
// (read copies need it); if not, the test is skipped loudly (requireDeps).
func kernelPassthrough(t *testing.T) bool {
	t.Helper()
	m := newTestMount(t)
	defer m.stop()
	if !m.fsys.PassthroughOn() {
		requireDeps(t, "FUSE passthrough (Linux 6.9+, root)", errors.New("the kernel refused it"))
		return false
	}
	return true
}

// alignedBuf is an n-byte buffer aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	buf := make([]byte, n+4096)
	off := int(uintptr(unsafe.Pointer(&buf[0])) % 4096)
	return buf[4096-off:][:n]
}

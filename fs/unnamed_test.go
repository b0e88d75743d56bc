package fs

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnnamedFiles: content written to a file with no name is kept. An
// O_TMPFILE file written, fsynced, given a name with linkat and closed
// reads back whole after a remount; a file unlinked while open and only
// then written commits at close. Both failed with EIO ("key required":
// an empty path named no family) and lost the bytes.
func TestUnnamedFiles(t *testing.T) {
	m := mountStore(t, t.TempDir()+"/store", false)
	data := randomBytes(11, 3<<20)

	fd, err := unix.Open(m.dir, unix.O_TMPFILE|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("open O_TMPFILE: %v", err)
	}
	f := os.NewFile(uintptr(fd), "tmpfile")
	defer f.Close() // before the unmount, if the test fails early
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync of the O_TMPFILE file: %v", err)
	}
	if err := unix.Linkat(fd, "", unix.AT_FDCWD, m.path("linked"), unix.AT_EMPTY_PATH); err != nil {
		t.Fatalf("linkat: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of the linked O_TMPFILE file: %v", err)
	}

	name := m.path("unlinked-then-written")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("new bytes"), 0); err != nil {
		t.Fatalf("write after unlink: %v", err)
	}
	got := make([]byte, 9)
	if _, err := w.ReadAt(got, 0); err != nil || string(got) != "new bytes" {
		t.Fatalf("read back after unlink: %q, %v", got, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close of the unlinked file: %v", err)
	}

	m = m.remount()
	back, err := os.ReadFile(m.path("linked"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, data) {
		t.Fatalf("the linked O_TMPFILE file has %d bytes after a remount, want the %d written", len(back), len(data))
	}
}

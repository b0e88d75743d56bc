package integration

import (
	"bytes"
	"os"
	"testing"
)

// TestTruncateRightAfterClose is the regression test for a race the random
// operation test found: the kernel releases a closed file asynchronously,
// and a truncate(2) of the path arriving before that release used to start
// an uncommitted writer that a new open could not see, so a read right
// after returned the old content. Many tight rounds make the window likely.
func TestTruncateRightAfterClose(t *testing.T) {
	m := newMount(t)
	p := m.path("f.bin")
	for round := 0; round < 300; round++ {
		data := bytes.Repeat([]byte{byte(round)}, 10_000+round)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		size := int64(round * 17 % 12_000)
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want := append(append([]byte{}, data[:min(int64(len(data)), size)]...), make([]byte, max(0, size-int64(len(data))))...)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: after truncate to %d read %d bytes, want %d", round, size, len(got), len(want))
		}
	}
}

// TestFsyncDirectory: fsync(2) of a directory (what careful writers do after
// os.replace) used to fail with EOPNOTSUPP; it must succeed, on the root and
// on a subdirectory, and fsync of a file opened read-only too.
func TestFsyncDirectory(t *testing.T) {
	m := newMount(t)
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("d/tmp"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("d/tmp"), m.path("d/final")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{m.dir, m.path("d"), m.path("d/final")} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Errorf("fsync %s: %v", p, err)
		}
		f.Close()
	}
	m.restart()
	if b, err := os.ReadFile(m.path("d/final")); err != nil || string(b) != "weights" {
		t.Fatalf("after remount: %q %v", b, err)
	}
}

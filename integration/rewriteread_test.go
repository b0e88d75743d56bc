package integration

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadAfterRewriteWhileOpen rewrites a file while a reader holds it
// open, then reads it through the daemon (O_DIRECT skips the kernel's page
// cache, as a read of an evicted page would). The read must return the new
// content, as on any filesystem: the reader of the committed version that
// the inode's open handles share used to outlive the commit of the rewrite,
// and kept serving the old version, still in the store as the new one's
// reference (fstests generic/451 saw "stale data from DIO read"). Both save
// modes.
func TestReadAfterRewriteWhileOpen(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	v1 := make([]float32, 1<<20)
	for i := range v1 {
		v1[i] = float32(rng.NormFloat64())
	}
	v2 := append([]float32(nil), v1...)
	for i := range v2 {
		v2[i] += 1e-3 * float32(rng.NormFloat64()) // the next checkpoint: a delta
	}
	old, new := npyFloat32(v1, ""), npyFloat32(v2, "")
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		m := newMount(t, flags...)
		path := filepath.Join(m.dir, "model.npy")
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
		syncDir(t, m.dir) // committed
		r, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		head := make([]byte, 4096)
		if _, err := r.ReadAt(head, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, new, 0o644); err != nil {
			t.Fatal(err)
		}
		syncDir(t, m.dir) // the rewrite committed, the reader still open
		d, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		buf := alignedBuffer(t, len(new)+4096)
		n, err := d.ReadAt(buf, 0)
		if n != len(new) || !bytes.Equal(buf[:n], new) {
			which := "neither version"
			if bytes.Equal(buf[:n], old) {
				which = "the old version"
			}
			t.Fatalf("O_DIRECT read after the rewrite: %d bytes (%v), %s; first difference from the new content at %d", n, err, which, firstDiff(buf[:n], new))
		}
		r.Close()
		d.Close()
		m.stop()
		fsck(t, m.store)
	})
}

// syncDir fsyncs dir: on ckptfs it waits for every commit.
func syncDir(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

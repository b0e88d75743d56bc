package fs

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// TestBlocksCountStoredBytes: du and ls -s of a committed file show the
// bytes the store keeps (its encoded size), so the saving shows where
// people look first; while the file is written, its logical size.
func TestBlocksCountStoredBytes(t *testing.T) {
	m := newTestMount(t)
	plain := make([]byte, 1<<20) // zeros: stored in a few pages
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(plain); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if want := (int64(len(plain)) + 511) / 512; st.Blocks != want {
		t.Errorf("while written: %d blocks, want %d (the logical size)", st.Blocks, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel keeps the attributes of the fstat above for AttrTimeout
	// (1 s): close commits, but nothing invalidates them.
	time.Sleep(1100 * time.Millisecond)
	if err := syscall.Stat(m.path("f"), &st); err != nil {
		t.Fatal(err)
	}
	info, err := m.store.Info(chain.Ino(st.Ino))
	if err != nil || info == nil {
		t.Fatalf("Info: %v, %v", info, err)
	}
	if st.Size != int64(len(plain)) {
		t.Errorf("size %d, want %d", st.Size, len(plain))
	}
	if want := (info.StoredBytes + 511) / 512; st.Blocks != want {
		t.Errorf("committed: %d blocks, want %d (%d stored bytes)", st.Blocks, want, info.StoredBytes)
	}
	if st.Blocks*512 >= st.Size/2 {
		t.Errorf("committed: %d blocks for %d bytes: the compression does not show", st.Blocks, st.Size)
	}
	// An empty file allocates nothing.
	if err := os.WriteFile(m.path("empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(m.path("empty"), &st); err != nil || st.Blocks != 0 {
		t.Errorf("empty file: %d blocks, %v", st.Blocks, err)
	}
}

// BenchmarkStoredBytes measures what fillAttr adds to a getattr of a
// committed file: Info (a metadata read transaction) the first time, a
// map lookup after; Inode, the read every getattr does anyway, for scale.
func BenchmarkStoredBytes(b *testing.B) {
	m := newTestMount(b)
	if err := os.WriteFile(m.path("f"), make([]byte, 4<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(m.path("f"), &st); err != nil {
		b.Fatal(err)
	}
	ino := chain.Ino(st.Ino)
	in, err := m.store.Names().Inode(ino)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Inode", func(b *testing.B) {
		for b.Loop() {
			_, _ = m.store.Names().Inode(ino)
		}
	})
	b.Run("Info", func(b *testing.B) {
		for b.Loop() {
			_, _ = m.store.Info(ino)
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_, _ = m.fsys.storedBytes(in)
		}
	})
}

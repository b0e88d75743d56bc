package fs

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

func size(round int) int { return 1<<20 + round*4096 }

// TestCutCoversClosedFiles: what a replicating store tells readers
// (FS.Cut). While a file is open for writing it is reported as being
// written; from the moment close(2) returns, either its commit has
// landed or its close is reported, never neither: a watermark taken then
// cannot pass a closed file the store lacks.
func TestCutCoversClosedFiles(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testCutCoversClosedFiles(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testCutCoversClosedFiles(t, true) })
}

func testCutCoversClosedFiles(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	for i := 0; i < 20; i++ {
		name := m.path("shard.pt")
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(randomBytes(int64(i), size(i))); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil {
			t.Fatal(err)
		}
		if _, writing := m.fsys.Cut(); len(writing) != 1 || uint64(writing[0]) != st.Ino {
			t.Fatalf("round %d: Cut reports %v being written, want inode %d", i, writing, st.Ino)
		}
		before := time.Now().UnixNano()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		oldest, writing := m.fsys.Cut()
		in, err := m.store.Names().Inode(chain.Ino(st.Ino))
		if err != nil {
			t.Fatal(err)
		}
		committed := in.Size == int64(size(i)) && in.Version != 0 // each round a new size
		if oldest == 0 && !committed {
			t.Fatalf("round %d: closed, not committed (size %d), and Cut reports no close", i, in.Size)
		}
		if oldest != 0 && (oldest < before || oldest > time.Now().UnixNano()) {
			t.Fatalf("round %d: Cut reports a close at %d, outside the close(2) call", i, oldest)
		}
		if len(writing) != 0 {
			t.Fatalf("round %d: closed, and Cut reports %v being written", i, writing)
		}
		m.fsys.Drain()
		if oldest, writing := m.fsys.Cut(); oldest != 0 || len(writing) != 0 {
			t.Fatalf("round %d: committed, and Cut reports a close at %d, %v being written", i, oldest, writing)
		}
	}
}

package chain

import (
	"io"
	"math"
	"math/rand"
	"os"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// smallDevice is a 64 MiB simulated SSD: big enough for the tests' files,
// small enough to run GC.
func openTestStore(t testing.TB, dir string, p policy.Policy) *DirStore {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: p, CacheBytes: 8 << 20}, Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// writeFile creates or replaces name (in the root) with data, streamed in
// pieces of the given size, and commits it.
func writeFile(t testing.TB, s *Store, name string, data []byte, piece int) meta.Ino {
	t.Helper()
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		if n, err = s.Names().Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.NewWriter(n.Ino, pathIs(name))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += piece {
		end := min(len(data), off+piece)
		if _, err := w.WriteAt(data[off:end], int64(off), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return n.Ino
}

// readFile reads a committed file through a Reader.
func readFile(t testing.TB, s *Store, name string) []byte {
	t.Helper()
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	r, err := s.OpenVersion(n.Version)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && err != io.EOF {
		t.Fatalf("read %s: %v", name, err)
	}
	if int64(len(out)) != n.Size {
		t.Fatalf("%s: reader size %d, inode size %d", name, len(out), n.Size)
	}
	return out
}

func mustCheck(t testing.TB, s *Store, deep bool) *CheckReport {
	t.Helper()
	rep, err := s.Check(deep)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Errorf("fsck: %s", p)
	}
	if t.Failed() {
		t.FailNow()
	}
	return rep
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func floatsNaNInf() []float32 {
	return []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, math.MaxFloat32}
}

// pathIs is a writer's path function for a file that keeps its name.
func pathIs(p string) func() string { return func() string { return p } }

// stagedFile is a staging file for CommitFile: size bytes, a hole but for
// pieces (offset: bytes). It is closed when the test ends.
func stagedFile(t testing.TB, size int64, pieces map[int64][]byte) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "staged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range pieces {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// fileInfo is what the store says of name (in the root).
func fileInfo(t testing.TB, s *Store, name string) *FileInfo {
	t.Helper()
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	info, err := s.Info(n.Ino)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

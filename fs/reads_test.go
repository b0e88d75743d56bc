package fs

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The mount raises the kernel's read-ahead (which the INIT reply can only
// lower) where it may: as root.
func TestKernelReadAhead(t *testing.T) {
	m := newTestMount(t)
	if os.Geteuid() != 0 {
		t.Skip("only root may set a mount's read-ahead")
	}
	kib, err := ReadAhead(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if kib != ReadAheadKiB {
		t.Fatalf("read-ahead %d KiB, want %d", kib, ReadAheadKiB)
	}
}

// Reads through a mapping (safetensors.safe_open, torch.load(mmap=True))
// of every save of a chain, cold, in tensor order, backwards and at random,
// return the bytes written.
func TestMmapReadsOfChain(t *testing.T) {
	m := newTestMount(t)
	series := safetensorsSeries(4)
	for k, data := range series {
		if err := os.WriteFile(m.path(fmt.Sprintf("model-%d.safetensors", k)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	last := m.path(fmt.Sprintf("model-%d.safetensors", len(series)-1))
	if d, _ := strconv.Atoi(xattr(t, last, "chain_depth")); d < 2 {
		t.Fatalf("last save at depth %d, want a chain", d)
	}
	for k, data := range series {
		name := m.path(fmt.Sprintf("model-%d.safetensors", k))
		m.store.DropCaches()
		dropPageCache(t, name)
		mmapReadInChild(t, name, data)
	}
}

func dropPageCache(t *testing.T, name string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// mmapReadInChild checks name's mapping against want in a child process
// (TestMmapReadChild): page faults on a FUSE file are served by this
// process, which must not be the one that takes them (see
// mmapSaveInChild).
func mmapReadInChild(t *testing.T, name string, want []byte) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "want")
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	runChildTest(t, "TestMmapReadChild", "CKPTFS_MMAP_READ="+src+"\n"+name)
}

// TestMmapReadChild is the child of mmapReadInChild: map the file read-only
// and compare it with the wanted bytes in order, then 64 KiB pieces
// backwards, then in random order, each time after dropping its pages.
func TestMmapReadChild(t *testing.T) {
	args := strings.Split(os.Getenv("CKPTFS_MMAP_READ"), "\n")
	if len(args) != 2 {
		t.Skip("SKIPPED: the child process of mmapReadInChild (the mapped-read tests start it with CKPTFS_MMAP_READ set): nothing to do on its own")
	}
	want, err := os.ReadFile(args[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(args[1])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(want), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if !bytes.Equal(mem, want) {
		t.Fatal("mapping differs in order")
	}
	const piece = 64 << 10
	n := (len(want) + piece - 1) / piece
	orders := map[string][]int{"backwards": make([]int, n), "at random": rand.New(rand.NewSource(1)).Perm(n)}
	for i := range n {
		orders["backwards"][i] = n - 1 - i
	}
	for how, order := range orders {
		if err := unix.Madvise(mem, unix.MADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		for _, i := range order {
			lo, hi := i*piece, min(len(want), (i+1)*piece)
			if !bytes.Equal(mem[lo:hi], want[lo:hi]) {
				t.Fatalf("mapping differs %s at %d", how, lo)
			}
		}
	}
}

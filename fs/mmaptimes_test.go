package fs

import (
	"os"
	"syscall"
	"testing"
)

// TestMmapWriteUpdatesTimes: a write through a shared mapping of a file
// moves its mtime and ctime, and stat right after close shows them
// (fstests generic/080 and 215). In passthrough mode the kernel writes the
// staging file itself, behind the attributes it cached at lookup.
func TestMmapWriteUpdatesTimes(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testMmapWriteUpdatesTimes(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testMmapWriteUpdatesTimes(t, true) })
}

func testMmapWriteUpdatesTimes(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	name := m.path("f")
	writePieces(t, name, randomBytes(5, 4096))
	m.fsys.Drain()
	before := statTimes(t, name) // the lookup's attributes, cached
	tick()
	mmapWriteInChild(t, name)
	after := statTimes(t, name)
	if after.mtime <= before.mtime || after.ctime <= before.ctime {
		t.Errorf("after a write through a mapping and close: mtime %d -> %d, ctime %d -> %d; want both later",
			before.mtime, after.mtime, before.ctime, after.ctime)
	}
	m.fsys.Drain()
	if got, err := os.ReadFile(name); err != nil || string(got[:6]) != "mapped" {
		t.Errorf("content after the commit: %q, %v", got, err)
	}
	if committed := statTimes(t, name); committed.mtime != after.mtime {
		t.Errorf("the commit moved the mtime %d -> %d", after.mtime, committed.mtime)
	}
}

// mmapWriteInChild writes "mapped" at the start of name through a shared
// mapping, in a child process. Not in this one: a page fault on a file of
// this process's own mount waits for the daemon's goroutines, and a garbage
// collection that must first stop the faulting thread never lets them run
// (the daemon-written case hung the CI's fs tests for 25 minutes).
func mmapWriteInChild(t *testing.T, name string) {
	t.Helper()
	runChildTest(t, "TestMmapWriteChild", "CKPTFS_MMAP_WRITE="+name)
}

// TestMmapWriteChild is the child of mmapWriteInChild: open the file,
// map its first page shared, read a byte (a read fault first, as
// generic/080's mread), write, unmap, close.
func TestMmapWriteChild(t *testing.T) {
	name := os.Getenv("CKPTFS_MMAP_WRITE")
	if name == "" {
		t.Skip("SKIPPED: the child process of mmapWriteInChild (TestMmapWriteUpdatesTimes starts it with CKPTFS_MMAP_WRITE set): nothing to do on its own")
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	_ = b[100]
	copy(b, "mapped")
	if err := syscall.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

package fs

import (
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

// gatedBackend holds every write while its gate is shut: the ingest behind
// a closed file cannot finish, so its commit stays pending.
type gatedBackend struct {
	storage.Backend
	gate atomic.Pointer[chan struct{}]
}

func (b *gatedBackend) Write(data []byte) (storage.Location, error) {
	if g := b.gate.Load(); g != nil {
		<-*g
	}
	return b.Backend.Write(data)
}

// shut holds writes until the returned function opens the gate.
func (b *gatedBackend) shut() (open func()) {
	g := make(chan struct{})
	b.gate.Store(&g)
	return func() { b.gate.Store(nil); close(g) }
}

// async runs fn and reports its end on the returned channel.
func async(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// stillWaiting fails the test if done has delivered within a short while.
func stillWaiting(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while the commit could not land", what, err)
	case <-time.After(150 * time.Millisecond):
	}
}

// TestCloseReturnsBeforeCommit: close returns with the bytes in the staging
// file, while the ingest and the commit go on in the background; stat
// answers at once with the new size, and a read with the new bytes (from
// the staging file); fsync and the report wait for the commit.
func TestCloseReturnsBeforeCommit(t *testing.T) {
	backend := &gatedBackend{Backend: memstore.New(4096, 32<<10)}
	m := newTestMountOn(t, backend)
	name := m.path("ckpt.bin")
	v1, v2 := randomBytes(1, 4<<20), randomBytes(2, 6<<20)
	writePieces(t, name, v1)
	m.fsys.Drain()

	open := backend.shut()
	closed := async(func() error { return os.WriteFile(name, v2, 0o644) })
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		open()
		t.Fatal("close waited for the commit")
	}
	// The release that starts the commit follows close asynchronously: an
	// fsync opened before it came would commit itself, holding the file
	// (and the read's open) until the gate opens, which the test never
	// reached (a CI run hung here for 25 minutes).
	waitCommitsStarted(t, m, 1)
	if st := statT(t, name); st.Size != int64(len(v2)) {
		t.Errorf("stat during the commit: size %d, want %d", st.Size, len(v2))
	}
	read := async(func() error {
		got, err := os.ReadFile(name)
		if err == nil && string(got) != string(v2) {
			t.Error("the read after close saw other bytes than written")
		}
		return err
	})
	synced := async(func() error {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	stillWaiting(t, "fsync of the file", synced)
	open()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if got := xattr(t, name, "family"); got != policy.FamilyOf("ckpt.bin") {
		t.Errorf("family %q", got)
	}
}

// TestRenameAndUnlinkDuringCommit: a file renamed while its commit runs in
// the background lands under its new name, in that name's family; one
// unlinked meanwhile is freed once the commit lands (the deep check at
// unmount finds nothing left over).
func TestRenameAndUnlinkDuringCommit(t *testing.T) {
	backend := &gatedBackend{Backend: memstore.New(4096, 32<<10)}
	m := newTestMountOn(t, backend)
	v1 := randomBytes(3, 3<<20)
	open := backend.shut()
	writePieces(t, m.path("save.tmp"), v1)
	writePieces(t, m.path("gone.tmp"), randomBytes(4, 3<<20))
	waitCommitsStarted(t, m, 2)
	if err := os.Rename(m.path("save.tmp"), m.path("model.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("gone.tmp")); err != nil {
		t.Fatal(err)
	}
	open()
	m.fsys.Drain()
	wantContent(t, m.path("model.bin"), v1)
	if got := xattr(t, m.path("model.bin"), "family"); got != policy.FamilyOf("model.bin") {
		t.Errorf("renamed during its commit: family %q, want %q", got, policy.FamilyOf("model.bin"))
	}
	if _, err := os.Stat(m.path("gone.tmp")); !os.IsNotExist(err) {
		t.Errorf("unlinked during its commit: %v", err)
	}
	if files, err := os.ReadDir(m.dir); err != nil || len(files) != 1 {
		t.Errorf("directory: %v %v", files, err)
	}
}

// TestSyncClose: with SyncClose (--sync-close) close returns only once the
// file is committed.
func TestSyncClose(t *testing.T) {
	backend := &gatedBackend{Backend: memstore.New(4096, 32<<10)}
	m := newTestMountOn(t, backend)
	m.fsys.SyncClose = true
	v := randomBytes(5, 4<<20)
	open := backend.shut()
	closed := async(func() error { return os.WriteFile(m.path("f"), v, 0o644) })
	stillWaiting(t, "close with SyncClose", closed)
	open()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wantContent(t, m.path("f"), v)
}

// TestDropCaches: a write to .ckptfs/drop_caches makes the next read of a
// file rebuild its chunks from the device again (a cold read), where a
// second read without it is served from the daemon's cache.
func TestDropCaches(t *testing.T) {
	// Every read through the daemon: none from a copy (readcopy.go).
	m := mountStoreSet(t, filepath.Join(t.TempDir(), "store"), true, MountOptions{}, func(m *testMount) { m.noReadCopies = true })
	writePieces(t, m.path("ckpt-1.bin"), randomBytes(8, 600<<10)) // fits the test mount's read cache
	writePieces(t, m.path("ckpt-2.bin"), randomBytes(9, 600<<10)) // ckpt-1 leaves the reference tier
	m.fsys.Drain()
	rebuilt := func() int64 {
		rep, err := m.ds.Report(storedir.ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep.ChunksRebuilt
	}
	read := func() {
		f, err := os.Open(m.path("ckpt-1.bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// Around the kernel's page cache: each read reaches the daemon.
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, f); err != nil {
			t.Fatal(err)
		}
	}
	read()
	first := rebuilt()
	read()
	if again := rebuilt(); again != first || first == 0 {
		t.Fatalf("chunks rebuilt: %d by the first read, %d after a second; want some, then none", first, again-first)
	}
	if err := os.WriteFile(m.path(controlDir, "drop_caches"), []byte("1\n"), 0); err != nil {
		t.Fatal(err)
	}
	read()
	if after := rebuilt(); after <= first {
		t.Errorf("a read after drop_caches rebuilt nothing (%d, %d)", first, after)
	}
	if _, err := os.ReadFile(m.path(controlDir, "drop_caches")); err == nil {
		t.Error("drop_caches could be read")
	}
}

// TestSmallFileCommitsInBackground: a small file's close returns before
// its commit (a commit is a synced metadata transaction, which a Hugging
// Face Trainer save paid at every close of its small files), stat answers
// without waiting for it, and the file's attributes, st_blocks included,
// are the same before and after the commit lands (smallFileMax).
func TestSmallFileCommitsInBackground(t *testing.T) {
	backend := &gatedBackend{Backend: memstore.New(4096, 32<<10)}
	m := newTestMountOn(t, backend)
	name := m.path("trainer_state.json")
	v := randomBytes(11, 3000)
	open := backend.shut()
	defer func() {
		if open != nil {
			open() // a failed test still unmounts
		}
	}()
	closed := async(func() error { return os.WriteFile(name, v, 0o644) })
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close of a small file waited for its commit")
	}
	waitCommitsStarted(t, m, 1)
	var st unix.Stat_t
	stat := async(func() error { return unix.Stat(name, &st) })
	select {
	case err := <-stat:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stat of a small file waited for its commit")
	}
	if m.fsys.runningCommits() == 0 {
		t.Fatal("the commit landed with its backend shut")
	}
	open()
	open = nil
	m.fsys.Drain()
	if again := statT(t, name); again.Blocks != st.Blocks || again.Size != int64(len(v)) || again.Mtim.Nano() != st.Mtim.Nano() {
		t.Errorf("after the commit: size %d blocks %d mtime %v; before it: blocks %d mtime %v (want the same, and size %d)",
			again.Size, again.Blocks, again.Mtim, st.Blocks, st.Mtim, len(v))
	}
	wantContent(t, name, v)
}

// waitCommitsStarted waits until n commits run in the background: a commit
// starts at the release of the file's last writer, which the kernel sends
// after close(2) returned.
func waitCommitsStarted(t *testing.T, m *testMount, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.fsys.runningCommits() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d commits running, want %d", m.fsys.runningCommits(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

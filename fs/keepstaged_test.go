package fs

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// failingCommits is a backend whose next fail commits fail with an error
// that is neither a full device nor a full host: a store's internal error.
type failingCommits struct {
	storage.Backend
	fail atomic.Int32
}

var errInjected = errors.New("test: injected commit failure")

func (b *failingCommits) Commit(tx *meta.Tx, loc storage.Location) error {
	if b.fail.Add(-1) >= 0 {
		return errInjected
	}
	b.fail.Store(0)
	return b.Backend.Commit(tx, loc)
}

// waitRetried waits for the commits under way, then until no save is
// kept for a retry.
func waitRetried(t *testing.T, m *testMount) {
	t.Helper()
	m.fsys.Drain()
	for deadline := time.Now().Add(20 * time.Second); m.fsys.SavesRetrying() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d saves still wait for a retry", m.fsys.SavesRetrying())
		}
	}
	m.fsys.Drain()
}

// TestFailedCommitKeepsClosedSave: a commit after close that fails for an
// internal error keeps the save in its staging file, as the file's
// content, and commits it on a later try; the failure is counted and
// reported by the next close. The save was dropped before ("its previous
// content stays"), and a new file stayed empty.
func TestFailedCommitKeepsClosedSave(t *testing.T) {
	backend := &failingCommits{Backend: memstore.New(4096, 12<<10)}
	m := newTestMountOn(t, backend)
	old, save := randomBytes(31, 3<<20), randomBytes(32, 2<<20+17)
	writePieces(t, m.path("a"), old)
	m.fsys.Drain()

	backend.fail.Store(2) // the commit at close and its first retry
	writePieces(t, m.path("a"), save)
	writePieces(t, m.path("new"), save[:70000])
	wantContent(t, m.path("a"), save)
	wantContent(t, m.path("new"), save[:70000])
	waitRetried(t, m)
	if n := m.fsys.CommitsFailed(); n < 2 {
		t.Errorf("%d failed commits counted, want at least 2", n)
	}
	wantContent(t, m.path("a"), save)
	wantContent(t, m.path("new"), save[:70000])
	// Committed: the store's own version holds the save.
	for name, want := range map[string][]byte{"a": save, "new": save[:70000]} {
		n, err := m.store.Names().Lookup(meta.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		if n.Size != int64(len(want)) {
			t.Errorf("%s: committed size %d, want %d", name, n.Size, len(want))
		}
	}
}

// TestFailedCommitReportedAtFsync: while its commits fail, fsync reports
// the error and the save stays the file's content; once a try succeeds,
// nothing is lost.
func TestFailedCommitReportedAtFsync(t *testing.T) {
	backend := &failingCommits{Backend: memstore.New(4096, 12<<10)}
	m := newTestMountOn(t, backend)
	data := randomBytes(33, 1<<20)
	backend.fail.Store(1 << 20)
	f, err := os.Create(m.path("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Error("fsync succeeded while every commit fails")
	}
	if err := f.Close(); err != nil {
		t.Logf("close: %v", err) // the failure may be reported here too
	}
	m.fsys.Drain()
	wantContent(t, m.path("b"), data)
	time.Sleep(1500 * time.Millisecond) // a retry or two fail as well
	wantContent(t, m.path("b"), data)
	backend.fail.Store(0)
	waitRetried(t, m)
	wantContent(t, m.path("b"), data)
	if n, err := m.store.Names().Lookup(meta.RootIno, "b"); err != nil || n.Size != int64(len(data)) {
		t.Errorf("b after the retry: %+v, %v", n, err)
	}
}

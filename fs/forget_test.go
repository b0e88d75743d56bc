package fs

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// forgetRecorder records the batches of inodes the filesystem asks the
// store to release.
type forgetRecorder struct {
	Namespace
	mu      sync.Mutex
	batches [][]chain.Ino
}

func (r *forgetRecorder) Forget(inos ...chain.Ino) error {
	r.mu.Lock()
	r.batches = append(r.batches, append([]chain.Ino(nil), inos...))
	r.mu.Unlock()
	if r.Namespace == nil {
		return nil
	}
	return r.Namespace.Forget(inos...)
}

// TestRemoveTreeForgetsInBatches: rm -rf of a checkpoint directory frees
// its files in one or two store transactions, not one per file (each is a
// synced commit that the next unlink would wait for), and frees them all.
func TestRemoveTreeForgetsInBatches(t *testing.T) {
	rec := &forgetRecorder{}
	m := newTestMountWrapped(t, nil, false, func(ns Namespace) Namespace { rec.Namespace = ns; return rec })
	dir := m.path("checkpoint-10")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 8
	for i := 0; i < files; i++ {
		data := make([]byte, 64<<10+i)
		rand.New(rand.NewSource(int64(i))).Read(data)
		if err := os.WriteFile(fmt.Sprintf("%s/f%d", dir, i), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.fsys.Drain()
	before := m.store.Statfs().FreePages
	rec.mu.Lock()
	rec.batches = nil
	rec.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	rec.mu.Lock()
	batches, forgotten := 0, 0
	for _, b := range rec.batches {
		if len(b) > 0 {
			batches++
			forgotten += len(b)
		}
	}
	rec.mu.Unlock()
	if forgotten < files {
		t.Fatalf("%d inodes forgotten after rm -rf of %d files", forgotten, files)
	}
	if batches > 2 {
		t.Errorf("rm -rf of %d files released them in %d batches: %v", files, batches, rec.batches)
	}
	if after := m.store.Statfs().FreePages; after <= before {
		t.Errorf("free pages %d after rm -rf, %d before: the files were not freed", after, before)
	}
}

// TestForgetQueueBatches: inodes forgotten a millisecond apart, as the
// unlinks of rm -rf are, reach the store as one batch, and only those
// nothing uses again.
func TestForgetQueueBatches(t *testing.T) {
	rec := &forgetRecorder{}
	f := &FS{names: rec, open: newOpenTable()}
	f.open.remember(5) // looked up again since: not freed
	for ino := chain.Ino(1); ino <= 8; ino++ {
		f.forget(ino)
		time.Sleep(time.Millisecond)
	}
	f.forgets.wait(f)
	if len(rec.batches) != 1 || len(rec.batches[0]) != 7 {
		t.Fatalf("batches %v, want one of the 7 unused inodes", rec.batches)
	}
	for _, ino := range rec.batches[0] {
		if ino == 5 {
			t.Fatal("an inode in use was released")
		}
	}
}

// TestForgetQueueWaitsForQuiet: a burst whose forgets come closer together
// than the quiet gap is freed as one batch, however long the burst (here
// several times the gap), as the unlinks of rm -rf on a loaded machine are.
func TestForgetQueueWaitsForQuiet(t *testing.T) {
	rec := &forgetRecorder{}
	f := &FS{names: rec, open: newOpenTable()}
	f.forgets.quiet = 200 * time.Millisecond
	f.forgets.maxDelay = time.Minute
	start := time.Now()
	for ino := chain.Ino(1); ino <= 12; ino++ {
		f.forget(ino)
		time.Sleep(50 * time.Millisecond)
	}
	burst := time.Since(start)
	rec.mu.Lock()
	freedEarly := len(rec.batches)
	rec.mu.Unlock()
	f.forgets.wait(f)
	if freedEarly != 0 {
		t.Errorf("a batch was freed during a %v burst whose gaps were under the 200ms quiet gap", burst)
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != 12 {
		t.Fatalf("batches %v, want one of 12 inodes", rec.batches)
	}
}

// TestForgetQueueFreesLongStreams: forgets that never go quiet are still
// freed as they come, no later than the longest delay after the oldest.
func TestForgetQueueFreesLongStreams(t *testing.T) {
	rec := &forgetRecorder{}
	f := &FS{names: rec, open: newOpenTable()}
	f.forgets.quiet = 200 * time.Millisecond
	f.forgets.maxDelay = 100 * time.Millisecond
	const stream = 2 * time.Second
	deadline := time.Now().Add(stream)
	queued, freedDuring := 0, false
	for !freedDuring && time.Now().Before(deadline) {
		queued++
		f.forget(chain.Ino(queued))
		time.Sleep(10 * time.Millisecond)
		rec.mu.Lock()
		freedDuring = len(rec.batches) > 0
		rec.mu.Unlock()
	}
	f.forgets.wait(f)
	if !freedDuring {
		t.Fatalf("a stream of forgets 10ms apart for %v was not freed before it ended (maxDelay 100ms)", stream)
	}
	total := 0
	for _, b := range rec.batches {
		total += len(b)
	}
	if total != queued {
		t.Fatalf("%d of %d inodes freed: %v", total, queued, rec.batches)
	}
}

// newUnmountedFS is a filesystem over a fresh in-memory store, not mounted,
// whose namespace records the forgets that reach it.
func newUnmountedFS(t *testing.T) (*FS, *forgetRecorder) {
	t.Helper()
	db, err := meta.Open(filepath.Join(t.TempDir(), medium.MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chain.NewStore(db, memstore.New(4096, 1<<10), nil, chain.Options{Policy: policy.Default(), CacheBytes: 1 << 20})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(); db.Close() })
	rec := &forgetRecorder{Namespace: store.Names()}
	f := New(rec, store)
	f.forgets.quiet = time.Millisecond
	return f, rec
}

// TestNoForgetAfterShutdown: go-fuse forgets the root node when its serve
// loop ends, which can be after the mount command's Drain and Shutdown,
// just before the store closes; that forget once reached the closed
// database ("i/o error: database not open" in fstests' log). After
// Shutdown nothing reaches the store; before it, the same forget does.
func TestNoForgetAfterShutdown(t *testing.T) {
	f, rec := newUnmountedFS(t)
	f.Root().(*Node).OnForget() // as go-fuse's OnUnmount does
	f.Drain()
	rec.mu.Lock()
	if len(rec.batches) != 1 {
		t.Fatalf("before shutdown, the root's forget reached the store in %d batches, want 1", len(rec.batches))
	}
	rec.mu.Unlock()

	f, rec = newUnmountedFS(t)
	f.Drain()
	f.Shutdown()
	f.Root().(*Node).OnForget()
	time.Sleep(50 * time.Millisecond) // past the queue's quiet time
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.batches) != 0 {
		t.Fatalf("after shutdown, forgets reached the store: %v", rec.batches)
	}
}

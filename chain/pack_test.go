package chain

import (
	"bytes"
	"errors"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage"
)

// failingBackend fails every Write from the failAt-th on (counting from 1).
type failingBackend struct {
	storage.Backend
	writes, failAt atomic.Int64
}

func (b *failingBackend) Write(data []byte) (storage.Location, error) {
	if n := b.writes.Add(1); b.failAt.Load() > 0 && n >= b.failAt.Load() {
		return nil, errors.New("injected backend write failure")
	}
	return b.Backend.Write(data)
}

// TestPackWriteFailure: a backend write that fails while the pack's writer
// goroutine runs fails the commit with that error; the file keeps its
// previous content, the space the commit wrote is free again, the
// goroutine is gone, and the next commit succeeds. An ingest aborted with
// writes in flight frees their space too.
func TestPackWriteFailure(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	fb := &failingBackend{Backend: s.data}
	s.data = fb
	rng := rand.New(rand.NewSource(9))
	first := randomBytes(rng, 1<<20)
	ino := writeFile(t, s, "f.bin", first, 1<<20)
	_, free0 := fb.Space()
	goroutines := runtime.NumGoroutine()
	// settled checks that what was written is free again and the pack's
	// writer goroutine gone (given a moment to exit).
	settled := func(after string) {
		t.Helper()
		if _, free := fb.Space(); free != free0 {
			t.Errorf("%d blocks free after %s, %d before", free, after, free0)
		}
		for i := 0; runtime.NumGoroutine() > goroutines && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			t.Errorf("%d goroutines after %s, %d before", n, after, goroutines)
		}
	}

	fb.writes.Store(0)
	fb.failAt.Store(3)
	second := randomBytes(rng, 8<<20)
	err := s.CommitFile(ino, "f.bin", stagedFile(t, int64(len(second)), map[int64][]byte{0: second}), 1)
	if err == nil || !strings.Contains(err.Error(), "injected backend write failure") {
		t.Fatalf("commit over a failing backend: %v, want the injected failure", err)
	}
	if got := readFile(t, s, "f.bin"); !bytes.Equal(got, first) {
		t.Fatal("the failed commit changed the file")
	}
	settled("the failed commit")

	// An ingest given up with pack writes in flight (no failure) waits for
	// them before it gives their space back.
	fb.failAt.Store(0)
	w, err := s.NewWriter(ino, pathIs("f.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(second, 0, 1); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	settled("an abort")

	if err := s.CommitFile(ino, "f.bin", stagedFile(t, int64(len(second)), map[int64][]byte{0: second}), 1); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "f.bin"); !bytes.Equal(got, second) {
		t.Fatal("the commit after the failure reads back different bytes")
	}
	mustCheck(t, s, true)
}

package fs

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCopiesBounded opens many committed files in place at once (every
// rank of a job rewriting its shard): the committed contents are copied
// into their staging files a few at a time, not all at once, since each
// copy holds a buffer and a reader's rebuilds (a daemon rewriting 24
// files of 100 MiB in place held 25 MB in copy buffers alone).
func TestCopiesBounded(t *testing.T) {
	m := newTestMount(t)
	defer m.stop()
	const files = 8
	rng := rand.New(rand.NewSource(3))
	want := make([][]byte, files)
	name := func(k int) string { return m.path(fmt.Sprintf("rank-%d.bin", k)) }
	for k := range want {
		want[k] = make([]byte, 1<<20+k)
		rng.Read(want[k])
		if err := os.WriteFile(name(k), want[k], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.fsys.Drain()
	m.fsys.dropUnusedCopies() // no save's staging file kept to join: each open copies

	var running, peak, copies atomic.Int32
	hook := func() {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		copies.Add(1)
		time.Sleep(50 * time.Millisecond)
		running.Add(-1)
	}
	testHookCopy.Store(&hook)
	defer testHookCopy.Store(nil)

	var wg sync.WaitGroup
	errs := make(chan error, files)
	for k := 0; k < files; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(name(k), os.O_RDWR, 0)
			if err != nil {
				errs <- err
				return
			}
			// One byte changed in place: the rest must be the copy.
			want[k][7] ^= 0xff
			if _, err := f.WriteAt(want[k][7:8], 7); err != nil {
				errs <- err
			}
			errs <- f.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slots := copySlotsFor(runtime.GOMAXPROCS(0))
	if copies.Load() < files {
		t.Fatalf("%d copies for %d in-place opens", copies.Load(), files)
	}
	if p := peak.Load(); p > int32(slots) || p < 2 {
		t.Fatalf("%d copies ran at once, want 2 to %d", p, slots)
	}
	m.fsys.Drain()
	for k := range want {
		got, err := os.ReadFile(name(k))
		if err != nil || !bytes.Equal(got, want[k]) {
			t.Fatalf("rank-%d.bin after its in-place write: %v (equal: %t)", k, err, bytes.Equal(got, want[k]))
		}
	}
}

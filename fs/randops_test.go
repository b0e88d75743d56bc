package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/randops"
)

// randopsSeeds is how many seeds TestRandomOps runs per save mode:
// CKPTFS_RANDOPS_SEEDS, or a few (more with CKPTFS_FULL).
func randopsSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_RANDOPS_SEEDS")); err == nil && n > 0 {
		return n
	}
	if os.Getenv("CKPTFS_FULL") != "" {
		return 40
	}
	return 4
}

// randopsFirstSeed lets a failing seed be run alone (CKPTFS_RANDOPS_SEED).
func randopsFirstSeed() int64 {
	if n, err := strconv.ParseInt(os.Getenv("CKPTFS_RANDOPS_SEED"), 10, 64); err == nil {
		return n
	}
	return 1
}

const (
	randopsWorkers = 3   // sequences at once in one mount
	randopsSteps   = 250 // operations per sequence
)

// TestRandomOps runs seeded random operation sequences (integration/
// randops) against an in-process mount of a store on the simulated SSD
// and against a plain directory, in both save modes, several sequences at
// once in one mount; after each seed it checks the trees, then the store
// (fsck, with the allocators' memory against the database). A failing
// sequence is shrunk and printed as a test case.
func TestRandomOps(t *testing.T) {
	for _, daemonWritten := range []bool{false, true} {
		mode := map[bool]string{false: "passthrough", true: "daemon-written"}[daemonWritten]
		t.Run(mode, func(t *testing.T) {
			first := randopsFirstSeed()
			for seed := first; seed < first+int64(randopsSeeds()); seed++ {
				if !runRandomSeed(t, seed, daemonWritten) {
					return
				}
			}
		})
	}
}

// randomMount mounts a fresh store on the simulated SSD. Whatever their
// size, files read whole become read copies (readcopy.go); with
// shortLinger, a backing file no handle uses goes after 20 ms instead of
// backingLinger, so that readers after a save's commit, which would join
// its staging file, make read copies of their own.
func randomMount(t *testing.T, daemonWritten, shortLinger bool) *testMount {
	return mountStoreSet(t, filepath.Join(t.TempDir(), "store"), true, MountOptions{NoPassthrough: daemonWritten},
		func(m *testMount) {
			m.readCopyMin = 1
			if shortLinger {
				m.setup = func(f *FS) { f.linger = 20 * time.Millisecond }
			}
		})
}

// shortLinger is randomMount's shortLinger for seed: every other seed.
func shortLinger(seed int64) bool { return seed%2 == 1 }

// runRandomSeed runs the workers' sequences of seed in one mount and
// reports whether they all agreed with the reference.
func runRandomSeed(t *testing.T, seed int64, daemonWritten bool) bool {
	t.Helper()
	m := randomMount(t, daemonWritten, shortLinger(seed))
	defer m.stop()
	ref := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, randopsWorkers)
	seqs := make([][]randops.Op, randopsWorkers)
	for w := range randopsWorkers {
		seqs[w] = randops.Generate(seed*100+int64(w), randopsSteps)
		r, err := randops.NewRunner(m.path(fmt.Sprintf("w%d", w)), filepath.Join(ref, fmt.Sprintf("w%d", w)))
		if err != nil {
			t.Fatal(err)
		}
		r.NoMmap = true // this process serves the mount (randops.Runner.NoMmap)
		r.View = m.path(controlDir, viewDirName, viewBF16Name, fmt.Sprintf("w%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			errs[w] = r.Run(seqs[w], 50)
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err == nil {
			continue
		}
		var mm *randops.Mismatch
		if !errors.As(err, &mm) {
			t.Fatalf("seed %d worker %d: %v", seed, w, err)
		}
		ops := seqs[w]
		if mm.Op.Kind != 0 || mm.Step > 0 {
			ops = ops[:min(len(ops), mm.Step)]
		}
		short := randops.Shrink(ops, 80, func(ops []randops.Op) bool { return replayFails(t, ops, daemonWritten, shortLinger(seed)) })
		t.Errorf("seed %d worker %d (CKPTFS_RANDOPS_SEED=%d): %v\nshrunk to %d operations (alone in a fresh mount; %s if it passes):\n%s",
			seed, w, seed, err, len(short), "the failure needs the other workers", randops.Format(short))
		return false
	}
	m.fsys.Drain()
	copies, _ := m.fsys.ReadCopies()
	if readers := m.fsys.readCopies.readers.Load(); !daemonWritten && (readers == 0 || shortLinger(seed) && copies == 0) {
		t.Errorf("seed %d: %d readers served from a copy of the committed content, %d read copies made: the sequences do not cover them", seed, readers, copies)
	}
	t.Logf("seed %d: %d read copies, %d readers served from copies", seed, copies, m.fsys.readCopies.readers.Load())
	rep, err := m.store.Check(false)
	if err != nil {
		t.Fatalf("seed %d: fsck: %v", seed, err)
	}
	for _, p := range rep.Problems {
		t.Errorf("seed %d: fsck: %v", seed, p)
	}
	return !t.Failed()
}

// replayFails runs ops alone in a fresh mount and reports whether they
// disagree with the reference.
func replayFails(t *testing.T, ops []randops.Op, daemonWritten, shortLinger bool) bool {
	return runAlone(t, ops, daemonWritten, shortLinger) != nil
}

// runAlone runs ops alone in a fresh mount against a fresh reference.
func runAlone(t *testing.T, ops []randops.Op, daemonWritten, shortLinger bool) error {
	m := randomMount(t, daemonWritten, shortLinger)
	defer m.stop()
	r, err := randops.NewRunner(m.path("w"), filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	r.NoMmap = true
	r.View = m.path(controlDir, viewDirName, viewBF16Name, "w")
	defer r.Close()
	return r.Run(ops, 0)
}

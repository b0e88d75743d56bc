package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/integration/randops"
)

// randopsTrials is how many seeds (or kill trials) a random-operation test
// runs per save mode: CKPTFS_RANDOPS_SEEDS, or few (more with CKPTFS_FULL).
func randopsTrials(quick, long int) int {
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_RANDOPS_SEEDS")); err == nil && n > 0 {
		return n
	}
	if full() {
		return long
	}
	return quick
}

// randopsFirst is the first seed or trial (CKPTFS_RANDOPS_SEED; make
// stress moves it on from batch to batch).
func randopsFirst() int64 {
	if n, err := strconv.ParseInt(os.Getenv("CKPTFS_RANDOPS_SEED"), 10, 64); err == nil {
		return n
	}
	return 1
}

// TestRandomOpsBinary runs the random-operation sequences of
// integration/randops against the binary, three at once in one mount,
// in both save modes, compared with a plain directory; the daemon's log
// and fsck are part of the verdict (mount.stop, fsck).
func TestRandomOpsBinary(t *testing.T) {
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		first := randopsFirst()
		for seed := first; seed < first+int64(randopsTrials(2, 20)); seed++ {
			m := newMount(t, flags...)
			ref := t.TempDir()
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for w := range errs {
				r, err := randops.NewRunner(m.path(fmt.Sprintf("w%d", w)), filepath.Join(ref, fmt.Sprintf("w%d", w)))
				if err != nil {
					t.Fatal(err)
				}
				r.View = m.path(fmt.Sprintf(".ckptfs/view/bf16/w%d", w))
				ops := randops.Generate(seed*100+int64(w), 300)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer r.Close()
					errs[w] = r.Run(ops, 50)
				}()
			}
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("seed %d worker %d (CKPTFS_RANDOPS_SEED in fs.TestRandomOps shrinks it): %v", seed, w, err)
				}
			}
			m.stop()
			fsck(t, m.store)
		}
	})
}

// closedContents is what each inode of the reference may hold after the
// daemon dies: for a file no writer has open, its content; for one open
// for writing, a content it had when the first of its writers opened it
// (a closed save is kept whole), at an fsync since, or at the close of one
// of its writers since (the daemon may take that close for the file's:
// a writer that appends takes a closed save over, and the kernel's release
// of a handle may come after another's open). Never bytes it never held.
type closedContents struct {
	mu      sync.Mutex
	writers map[uint64]int
	allowed map[uint64][][]byte
}

func (c *closedContents) writer(ino uint64, content []byte, opened bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !opened {
		if c.writers[ino]--; c.writers[ino] <= 0 {
			delete(c.writers, ino)
			delete(c.allowed, ino)
		} else {
			c.allowed[ino] = append(c.allowed[ino], content)
		}
		return
	}
	if c.writers[ino]++; c.writers[ino] == 1 {
		c.allowed[ino] = [][]byte{append([]byte{}, content...)}
	}
}

func (c *closedContents) synced(ino uint64, content []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers[ino] > 0 {
		c.allowed[ino] = append(c.allowed[ino], content)
	}
}

// killRegressions are kill trials that once failed, run first every time
// (both found by make stress):
//   - 710272 fsyncs a file through a read-only handle while another handle
//     writes it; the daemon commits then, as fsync is the file's, and the
//     test's record had not allowed that content;
//   - 720082 closes a file, opens it O_APPEND and appends, then opens it
//     O_TRUNC: the daemon committed the closed save with the appended
//     bytes, which no one had closed or synced, and a SIGKILL kept them;
//   - 740161 closes a file, opens it O_WRONLY|O_APPEND and fallocates a
//     zeroed range inside it: the staging file stopped keeping the closed
//     save as its first bytes without committing it, and a SIGKILL left
//     the file empty (its content before that save);
//   - 770042 saves a file, opens and closes it O_APPEND, renames it, opens
//     it O_RDWR|O_APPEND, appends and writes through a mapping
//     (passthrough): the open committed the closed save but left the
//     staging file claiming its first bytes as that save, and a SIGKILL
//     brought back the mapping's bytes that no one closed or synced.
var killRegressions = []int64{710272, 720082, 740161, 770042}

// TestRandomOpsKill kills the daemon with SIGKILL at random steps of a
// random-operation sequence, mounts the store again, and checks every
// file: one closed before the kill holds its closed content, one still
// open for writing the content it had at its first writer's open or at an
// fsync since, whole; names and attributes are all there. The sequence
// then goes on in the new mount. Both save modes.
func TestRandomOpsKill(t *testing.T) {
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		first := randopsFirst()
		trials := append([]int64{}, killRegressions...)
		for trial := first; trial < first+int64(randopsTrials(3, 30)); trial++ {
			trials = append(trials, trial)
		}
		for _, trial := range trials {
			rng := rand.New(rand.NewSource(trial))
			m := newMount(t, flags...)
			// A kill interrupts what the daemon was doing; recovery logs
			// what it did about it as warnings, never as errors.
			ref := t.TempDir()
			r, err := randops.NewRunner(m.path("w"), filepath.Join(ref, "w"))
			if err != nil {
				t.Fatal(err)
			}
			cc := &closedContents{writers: map[uint64]int{}, allowed: map[uint64][][]byte{}}
			r.Writers, r.Synced = cc.writer, cc.synced
			ops := randops.Generate(trial*7919, 300)
			kills := map[int]bool{rng.Intn(len(ops)): true, rng.Intn(len(ops)): true}
			for k, op := range ops {
				if kills[k] {
					m.kill9()
					m.start()
					checkClosed(t, trial, k, r, cc)
					r.Forget()
					cc = &closedContents{writers: map[uint64]int{}, allowed: map[uint64][][]byte{}}
					r.Writers, r.Synced = cc.writer, cc.synced
				}
				if err := r.Apply(op); err != nil {
					r.Close()
					t.Fatalf("trial %d: %v", trial, err)
				}
			}
			r.Close()
			if err := r.CompareTrees(); err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			m.stop()
			fsck(t, m.store)
		}
	})
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkClosed compares the remounted tree with the reference after a kill
// at step k, and makes the reference hold what the mount kept of files
// open for writing.
func checkClosed(t *testing.T, trial int64, k int, r *randops.Runner, cc *closedContents) {
	t.Helper()
	root, ref := r.Roots()
	err := filepath.Walk(ref, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(ref, p)
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return fmt.Errorf("%s after the kill: %w", rel, err)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		allowed, open := cc.allowed[ino]
		if !open {
			want, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("%s, closed before the kill: %d bytes, want its closed %d", rel, len(got), len(want))
			}
			return nil
		}
		for _, a := range allowed {
			if bytes.Equal(got, a) {
				// The reference takes what the mount kept.
				return os.WriteFile(p, got, 0o644)
			}
		}
		if d := os.Getenv("CKPTFS_RANDOPS_DUMP"); d != "" {
			os.WriteFile(filepath.Join(d, "got"), got, 0o644)
			for i, a := range allowed {
				os.WriteFile(filepath.Join(d, fmt.Sprint("allowed", i)), a, 0o644)
			}
		}
		var diffs []string
		for _, a := range allowed {
			diffs = append(diffs, fmt.Sprintf("%d bytes, first difference at %d", len(a), firstDifference(got, a)))
		}
		return fmt.Errorf("%s, open for writing at the kill: %d bytes, none of the %d contents it may have (%s)", rel, len(got), len(allowed), strings.Join(diffs, "; "))
	})
	if err != nil {
		t.Fatalf("trial %d, kill before step %d: %v", trial, k, err)
	}
	if err := r.CompareTrees(); err != nil {
		t.Fatalf("trial %d, kill before step %d: %v", trial, k, err)
	}
}

// TestRandomOpsRegressions runs the shrunk sequences the random-operation
// tests found (randops.Regressions) against the binary, in both save modes.
func TestRandomOpsRegressions(t *testing.T) {
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		m := newMount(t, flags...)
		ref := t.TempDir()
		i := 0
		for name, ops := range randops.Regressions {
			i++
			r, err := randops.NewRunner(m.path(fmt.Sprintf("r%d", i)), filepath.Join(ref, fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			err = r.Run(ops, 0)
			r.Close()
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}

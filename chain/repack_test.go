package chain

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/internal/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// TestPlanChain checks the dynamic programme against every plan of small
// random instances: the least total, and no depth above the bound.
func TestPlanChain(t *testing.T) {
	rng := rand.New(rand.NewSource(51))
	for trial := 0; trial < 400; trial++ {
		n := 1 + rng.Intn(8)
		k := rng.Intn(4)
		whole, delta := make([]int64, n), make([]int64, n)
		for i := range whole {
			whole[i] = 50 + rng.Int63n(100)
			delta[i] = 1 + rng.Int63n(120)
			if i == 0 || rng.Intn(6) == 0 {
				delta[i] = noCoding
			}
		}
		depths, total := planChain(whole, delta, k)
		var sum int64
		for i, d := range depths {
			switch {
			case d > k:
				t.Fatalf("trial %d: depth %d above the bound %d", trial, d, k)
			case d == 0:
				sum += whole[i]
			case i == 0 || depths[i-1] != d-1 || delta[i] >= noCoding:
				t.Fatalf("trial %d: depths %v are no chain", trial, depths)
			default:
				sum += delta[i]
			}
		}
		if sum != total {
			t.Fatalf("trial %d: plan %v costs %d, reported %d", trial, depths, sum, total)
		}
		if best := bruteForcePlan(whole, delta, k); best != total {
			t.Fatalf("trial %d: whole %v delta %v k %d: plan costs %d, best is %d", trial, whole, delta, k, total, best)
		}
	}
}

// bruteForcePlan tries every choice of baselines.
func bruteForcePlan(whole, delta []int64, k int) int64 {
	n := len(whole)
	best := int64(noCoding)
	for mask := 0; mask < 1<<n; mask++ {
		if mask&1 == 0 {
			continue // the first file has nothing before it
		}
		var sum int64
		d := 0
		ok := true
		for i := 0; i < n && ok; i++ {
			if mask&(1<<i) != 0 {
				d = 0
				sum += whole[i]
				continue
			}
			d++
			ok = d <= k && delta[i] < noCoding
			sum += delta[i]
		}
		if ok && sum < best {
			best = sum
		}
	}
	return best
}

// repackFixture writes a run into a store whose policy makes long chains:
// files ckpt-00..ckpt-NN of a training, a config file per save (raw, in a
// family of its own), last.npy rewritten in place at every save, and
// best-NN.npy, each deleting the one before: those two leave hidden versions
// behind. It returns every file's content.
func repackFixture(t testing.TB, s *Store, saves int) map[string][]byte {
	t.Helper()
	series := ckpttest.TrainingSeries(7, 150_000, saves)
	other := ckpttest.TrainingSeries(8, 100_000, saves)
	best := ckpttest.TrainingSeries(9, 80_000, saves)
	want := map[string][]byte{}
	for i, w := range series {
		name := fmt.Sprintf("ckpt-%02d.npy", i)
		want[name] = ckpttest.NpyFile(w)
		writeFile(t, s, name, want[name], 1<<16)
		cfg := fmt.Sprintf("config-%02d.json", i)
		want[cfg] = []byte(fmt.Sprintf(`{"step": %d, "lr": 0.001}`, i*100))
		writeFile(t, s, cfg, want[cfg], 1<<16)
		want["last.npy"] = ckpttest.NpyFile(other[i])
		writeFile(t, s, "last.npy", want["last.npy"], 1<<16)
		b := fmt.Sprintf("best-%02d.npy", i)
		want[b] = ckpttest.NpyFile(best[i])
		writeFile(t, s, b, want[b], 1<<16)
		if i > 0 {
			prev := fmt.Sprintf("best-%02d.npy", i-1)
			if err := s.Names().Unlink(meta.RootIno, prev, nil); err != nil {
				t.Fatal(err)
			}
			delete(want, prev)
		}
	}
	return want
}

func checkFiles(t testing.TB, s *Store, want map[string][]byte) {
	t.Helper()
	for name, b := range want {
		if got := readFile(t, s, name); !bytes.Equal(got, b) {
			t.Fatalf("%s: %d bytes read back differ from the %d written", name, len(got), len(b))
		}
	}
}

func deepChains() policy.Policy {
	p := policy.Default()
	p.SnapDis = 12 // depths up to 11
	return p
}

func TestRepack(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	want := repackFixture(t, s, 24)
	mustCheck(t, s, true)

	dry, err := s.Repack(RepackOptions{MaxDepth: 2, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Recoded != 0 || dry.StoredAfter != dry.StoredBefore || dry.WorstDecodesAfter != dry.WorstDecodesBefore {
		t.Fatalf("a dry run changed the store: %+v", dry)
	}
	if dry.WorstDecodesBefore != 12 {
		t.Fatalf("fixture's worst read decodes %d chunks per chunk, want 12", dry.WorstDecodesBefore)
	}

	for _, k := range []int{2, 0, 5} {
		rep, err := s.Repack(RepackOptions{MaxDepth: k})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("max depth %d: stored %d -> %d bytes, worst decodes %d -> %d, versions %d -> %d, %d measured, %d re-coded",
			k, rep.StoredBefore, rep.StoredAfter, rep.WorstDecodesBefore, rep.WorstDecodesAfter,
			rep.VersionsBefore, rep.VersionsAfter, rep.Measured, rep.Recoded)
		if rep.WorstDecodesAfter > k+1 {
			t.Fatalf("max depth %d: a read decodes %d chunks per chunk", k, rep.WorstDecodesAfter)
		}
		checkFiles(t, s, want)
		mustCheck(t, s, true)
		var planned int64
		for _, f := range rep.Families {
			if f.Kept {
				planned += f.StoredBefore
			} else {
				planned += f.Planned
			}
		}
		if rep.StoredAfter != planned {
			t.Errorf("max depth %d: stored %d bytes, the plan said %d", k, rep.StoredAfter, planned)
		}
		switch k {
		case 2:
			// The hidden versions of last.npy are gone: one version a file.
			if rep.VersionsBefore <= len(want) || rep.VersionsAfter != len(want) {
				t.Errorf("max depth 2: %d versions before, %d after, want %d after", rep.VersionsBefore, rep.VersionsAfter, len(want))
			}
		case 0:
			if rep.StoredAfter <= rep.StoredBefore {
				t.Errorf("every file whole stores %d bytes, not more than %d", rep.StoredAfter, rep.StoredBefore)
			}
		case 5:
			if rep.StoredAfter >= rep.StoredBefore {
				t.Errorf("max depth 5 after 0 stores %d bytes, not fewer than %d", rep.StoredAfter, rep.StoredBefore)
			}
		}
	}
	again, err := s.Repack(RepackOptions{MaxDepth: 5})
	if err != nil {
		t.Fatal(err)
	}
	if again.Recoded != 0 || again.StoredAfter != again.StoredBefore {
		t.Errorf("a second repack with the same bound re-coded %d versions (%d -> %d bytes)", again.Recoded, again.StoredBefore, again.StoredAfter)
	}

	// The store goes on: the next save deltas against the repacked chain
	// within the store's own bound.
	next := ckpttest.TrainingSeries(7, 150_000, 25)[24]
	want["ckpt-24.npy"] = ckpttest.NpyFile(next)
	writeFile(t, s, "ckpt-24.npy", want["ckpt-24.npy"], 1<<16)
	checkFiles(t, s, want)
	mustCheck(t, s, true)
}

// TestRepackStopsCleanly stops a repack after each number of swaps, as a
// failure or a kill between two transactions would, and checks the store.
func TestRepackStopsCleanly(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	want := repackFixture(t, s, 14)
	stop := errors.New("stop")
	for n := 1; ; n++ {
		rep, err := s.Repack(RepackOptions{MaxDepth: 1, afterSwap: func(swapped int) error {
			if swapped == 1 {
				return stop
			}
			return nil
		}})
		checkFiles(t, s, want)
		mustCheck(t, s, false)
		if err == nil {
			if rep.WorstDecodesAfter > 2 {
				t.Fatalf("finished repack leaves reads of %d decodes", rep.WorstDecodesAfter)
			}
			break
		}
		if !errors.Is(err, stop) {
			t.Fatal(err)
		}
		if n > 60 {
			t.Fatal("repack never finished")
		}
	}
	mustCheck(t, s, true)
}

// repackVictimEnv makes the test binary a repack to be killed.
const repackVictimEnv = "CKPTFS_CHAIN_REPACK_VICTIM"

func repackVictim(dir string) {
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: deepChains()}, Device: nandsim.SmallConfig()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("repacking")
	_, err = ds.Store.Repack(RepackOptions{MaxDepth: 1, afterSwap: func(n int) error {
		fmt.Println("swapped", n)
		return nil
	}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ds.Close()
	fmt.Println("done")
}

// TestRepackKill kills repacks with SIGKILL at random moments: every file
// reads back exactly after each, fsck finds nothing, and a repack run again
// finishes the plan.
func TestRepackKill(t *testing.T) {
	trials := 6
	if os.Getenv("CKPTFS_FULL") != "" {
		trials = 25
	}
	rng := rand.New(rand.NewSource(5151))
	midway := 0 // kills that landed between two swaps of a repack
	for trial := 0; trial < trials; trial++ {
		dir := t.TempDir()
		ds := openTestStore(t, dir, deepChains())
		want := repackFixture(t, ds.Store, 14)
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
		var finished bool
		for round := 0; round < 40 && !finished; round++ {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), repackVictimEnv+"="+dir)
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			for lines.Scan() && lines.Text() != "repacking" {
			}
			// Kill at a random moment: some time in (while it plans, or
			// between swaps), or just after a random swap, when the next
			// re-coding is being written.
			kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
			timer := time.AfterFunc(time.Duration(rng.Intn(150))*time.Millisecond, kill)
			afterSwap := -1
			if rng.Intn(2) == 0 {
				timer.Stop()
				afterSwap = 1 + rng.Intn(4)
			}
			swapped := 0
			for lines.Scan() {
				line := lines.Text()
				switch {
				case line == "done":
					finished = true
				case strings.HasPrefix(line, "error"):
					t.Fatalf("trial %d: victim: %s", trial, line)
				case strings.HasPrefix(line, "swapped"):
					swapped++
					if swapped == afterSwap {
						time.AfterFunc(time.Duration(rng.Intn(3000))*time.Microsecond, kill)
					}
				}
			}
			timer.Stop()
			cmd.Wait()
			if swapped > 0 && !finished {
				midway++
			}

			ds := openTestStore(t, dir, deepChains())
			checkFiles(t, ds.Store, want)
			mustCheck(t, ds.Store, true)
			if err := ds.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !finished {
			t.Fatalf("trial %d: repack killed 40 times never finished", trial)
		}
		ds = openTestStore(t, dir, deepChains())
		rep, err := ds.Store.Repack(RepackOptions{MaxDepth: 1, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.WorstDecodesBefore > 2 {
			t.Errorf("trial %d: after the repack a read decodes %d chunks per chunk", trial, rep.WorstDecodesBefore)
		}
		for _, f := range rep.Families {
			if !f.Kept {
				t.Errorf("trial %d: family %s not at its plan after the repack", trial, f.Name)
			}
		}
		ds.Close()
	}
	t.Logf("%d trials, %d kills between two swaps", trials, midway)
	if midway == 0 {
		t.Error("no kill landed in the middle of a repack: the test tested nothing")
	}
}

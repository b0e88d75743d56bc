package chain

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// TestPlanTree checks the dynamic programme against every plan of small
// random instances: the least total, references within the window, and no
// depth above the bound. With a window of 1 it plans chains.
func TestPlanTree(t *testing.T) {
	rng := rand.New(rand.NewSource(51))
	for trial := 0; trial < 600; trial++ {
		n := 1 + rng.Intn(7)
		k := rng.Intn(4)
		w := 1 + rng.Intn(3)
		whole, delta := make([]int64, n), make([][]int64, n)
		for i := range whole {
			whole[i] = 50 + rng.Int63n(100)
			delta[i] = make([]int64, w)
			for g := range delta[i] {
				delta[i][g] = 1 + rng.Int63n(120)
				if g >= i || rng.Intn(6) == 0 {
					delta[i][g] = noCoding
				}
			}
		}
		refs, depths, total := planTree(whole, delta, k, w)
		var sum int64
		for i, r := range refs {
			switch {
			case depths[i] > k:
				t.Fatalf("trial %d: depth %d above the bound %d", trial, depths[i], k)
			case r < 0:
				if depths[i] != 0 {
					t.Fatalf("trial %d: file %d stored whole at depth %d", trial, i, depths[i])
				}
				sum += whole[i]
			case r >= i || i-r > w || delta[i][i-r-1] >= noCoding || depths[i] != depths[r]+1:
				t.Fatalf("trial %d: refs %v depths %v: file %d against %d is no plan", trial, refs, depths, i, r)
			default:
				sum += delta[i][i-r-1]
			}
		}
		if sum != total {
			t.Fatalf("trial %d: plan %v costs %d, reported %d", trial, refs, sum, total)
		}
		if best := bruteForcePlan(whole, delta, k, make([]int, n), 0); best != total {
			t.Fatalf("trial %d: whole %v delta %v k %d w %d: plan costs %d, best is %d", trial, whole, delta, k, w, total, best)
		}
	}
}

// bruteForcePlan tries every choice for files i.. (each whole or against
// one of the files in its window whose depth is below k), depths holding
// the depths chosen for the files before i.
func bruteForcePlan(whole []int64, delta [][]int64, k int, depths []int, i int) int64 {
	if i == len(whole) {
		return 0
	}
	depths[i] = 0
	best := whole[i] + bruteForcePlan(whole, delta, k, depths, i+1)
	for g := 1; g <= len(delta[i]) && g <= i; g++ {
		if depths[i-g] >= k || delta[i][g-1] >= noCoding {
			continue
		}
		depths[i] = depths[i-g] + 1
		best = min(best, delta[i][g-1]+bruteForcePlan(whole, delta, k, depths, i+1))
	}
	return best
}

func TestPlanWindow(t *testing.T) {
	for _, c := range []struct{ depth, want, got int }{
		{3, 0, 4}, {3, 1, 1}, {0, 0, 4}, {5, 0, 3}, {12, 0, 2}, {31, 0, 2}, {32, 0, 1}, {1000, 0, 1}, {2, 9, 6},
	} {
		if got := planWindow(c.depth, c.want); got != c.got {
			t.Errorf("planWindow(%d, %d) = %d, want %d", c.depth, c.want, got, c.got)
		}
	}
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

// TestRepackTrees plans the fixture at a bound of 1 as chains (a window of
// 1) and as trees: no family's tree stores more than its chains (the
// chains are among the trees the programme tries), the training series'
// tree stores less by coding several files against one baseline, and the
// repack that applies it keeps every file and the bound.
func TestRepackTrees(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	want := repackFixture(t, s, 16)
	planned := func(window int) (map[string]RepackFamily, int64) {
		rep, err := s.Repack(RepackOptions{MaxDepth: 1, Window: window, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		fams := map[string]RepackFamily{}
		var total int64
		for _, f := range rep.Families {
			fams[f.Name] = f
			total += f.Planned
		}
		return fams, total
	}
	chains, chainTotal := planned(1)
	trees, treeTotal := planned(0)
	t.Logf("max depth 1: chains plan %d bytes, trees %d (%.3f)", chainTotal, treeTotal, float64(treeTotal)/float64(chainTotal))
	far := 0
	for name, tf := range trees {
		cf := chains[name]
		if tf.Planned > cf.Planned || cf.FarDeltas != 0 {
			t.Errorf("family %s: trees plan %d bytes, chains %d (%d deltas further back)", name, tf.Planned, cf.Planned, cf.FarDeltas)
		}
		if tf.FarDeltas > 0 && tf.Planned < cf.Planned {
			far++
		}
	}
	if far == 0 {
		t.Error("no family's tree stores less than its chains by coding against a file further back")
	}
	rep, err := s.Repack(RepackOptions{MaxDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Window != defaultPlanWindow || rep.WorstDecodesAfter > 2 {
		t.Errorf("window %d, reads of %d decodes after the repack", rep.Window, rep.WorstDecodesAfter)
	}
	checkFiles(t, s, want)
	mustCheck(t, s, true)
	again, err := s.Repack(RepackOptions{MaxDepth: 1})
	if err != nil || again.Recoded != 0 {
		t.Fatalf("the same plan again re-coded %d versions (%v)", again.Recoded, err)
	}
}

func TestPlanParts(t *testing.T) {
	for _, c := range []struct {
		refs []int
		want [][2]int
	}{
		{nil, nil},
		{[]int{-1, 0, 1, -1, 3}, [][2]int{{3, 5}, {0, 3}}},
		{[]int{-1, 0, 0, -1, 2, 3}, [][2]int{{0, 6}}},
		{[]int{-1, -1, 0, 1, -1}, [][2]int{{4, 5}, {0, 4}}},
	} {
		got := planParts(c.refs)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("planParts(%v) = %v, want %v", c.refs, got, c.want)
		}
	}
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

// repackVictimEnv makes the test binary a repack to be killed;
// repackVictimTierEnv makes the repack tier the files too.
const (
	repackVictimEnv     = "CKPTFS_CHAIN_REPACK_VICTIM"
	repackVictimTierEnv = "CKPTFS_CHAIN_REPACK_VICTIM_TIER"
	// repackVictimCodecEnv makes the repack change the codec to split16.
	repackVictimCodecEnv = "CKPTFS_CHAIN_REPACK_VICTIM_CODEC"
	// repackVictimOnlineEnv makes it a mount's online tier pass
	// (onlineTier), on a store of the default policy.
	repackVictimOnlineEnv = "CKPTFS_CHAIN_REPACK_VICTIM_ONLINE"
)

// victimTier is the tier the killed repacks apply.
func victimTier() (encode.Lossy, int, int) { return encode.LossyBF16, 2, 4 }

func repackVictim(dir string) {
	online := os.Getenv(repackVictimOnlineEnv) != ""
	pol := deepChains()
	if online {
		pol = policy.Default()
	}
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: pol}, Device: nandsim.SmallConfig()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("repacking")
	o := RepackOptions{MaxDepth: 1, afterSwap: func(n int) error {
		fmt.Println("swapped", n)
		return nil
	}}
	if os.Getenv(repackVictimTierEnv) != "" {
		o.Lossy, o.ExactNewest, o.ExactEvery = victimTier()
	}
	if os.Getenv(repackVictimCodecEnv) != "" {
		c := encode.Split16
		o.Codec = &c
	}
	if online {
		afterSwap := o.afterSwap
		o = onlineTier(nil)
		o.afterSwap = afterSwap
	}
	_, err = ds.Store.Repack(o)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ds.Close()
	fmt.Println("done")
}

// killRepackVictim runs the test binary as a repack victim (env names
// the store and what it does) and kills it with SIGKILL at a random
// moment: within maxDelay (while it plans, or between swaps), or, every
// other time, just after one of its first maxSwap swaps, when the next
// re-coding is being written. It reports whether the repack finished, and
// how many swaps it made.
func killRepackVictim(t *testing.T, rng *rand.Rand, env []string, maxDelay time.Duration, maxSwap int) (finished bool, swapped int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "repacking" {
	}
	kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
	timer := time.AfterFunc(time.Duration(rng.Int63n(int64(maxDelay))), kill)
	afterSwap := -1
	if rng.Intn(2) == 0 {
		timer.Stop()
		afterSwap = 1 + rng.Intn(maxSwap)
	}
	for lines.Scan() {
		switch line := lines.Text(); {
		case line == "done":
			finished = true
		case strings.HasPrefix(line, "error"):
			t.Fatalf("victim: %s", line)
		case strings.HasPrefix(line, "swapped"):
			swapped++
			if swapped == afterSwap {
				time.AfterFunc(time.Duration(rng.Intn(3000))*time.Microsecond, kill)
			}
		}
	}
	timer.Stop()
	cmd.Wait()
	return finished, swapped
}

// checkCodec fails unless every file's version is coded with codec.
func checkCodec(t *testing.T, s *Store, codec string) {
	t.Helper()
	ents, err := s.Names().ReadDir(meta.RootIno)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		info, err := s.Info(e.Inode.Ino)
		if err != nil {
			t.Fatal(err)
		}
		if info.Version != 0 && info.Codec != codec {
			t.Errorf("%s: codec %s, want %s", e.Name, info.Codec, codec)
		}
	}
}

// TestRepackKill kills repacks with SIGKILL at random moments: every file
// reads back exactly after each (or, in the trials that tier, exactly or
// wholly rounded, as its mark says), fsck finds nothing, and a repack run
// again finishes the plan; in the trials that change the codec, every file
// ends coded with the new one.
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
		tiered := trial%2 == 1
		recodec := trial%4 == 2 // the repack changes the codec to split16
		var want, rounded map[string][]byte
		if tiered {
			want, rounded = tierFixture(t, ds.Store, 12)
		} else {
			want = repackFixture(t, ds.Store, 14)
		}
		check := func(s *Store) {
			if tiered {
				checkTier(t, s, want, rounded)
			} else {
				checkFiles(t, s, want)
			}
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
		var finished bool
		for round := 0; round < 40 && !finished; round++ {
			env := []string{repackVictimEnv + "=" + dir}
			if tiered {
				env = append(env, repackVictimTierEnv+"=1")
			}
			if recodec {
				env = append(env, repackVictimCodecEnv+"=1")
			}
			var swapped int
			finished, swapped = killRepackVictim(t, rng, env, 150*time.Millisecond, 4)
			if swapped > 0 && !finished {
				midway++
			}

			ds := openTestStore(t, dir, deepChains())
			check(ds.Store)
			mustCheck(t, ds.Store, true)
			if err := ds.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !finished {
			t.Fatalf("trial %d: repack killed 40 times never finished", trial)
		}
		final := deepChains()
		if recodec {
			final.Codec = encode.Split16
		}
		ds = openTestStore(t, dir, final)
		if recodec {
			checkCodec(t, ds.Store, split16Name)
		}
		o := RepackOptions{MaxDepth: 1, DryRun: true}
		if tiered {
			o.Lossy, o.ExactNewest, o.ExactEvery = victimTier()
			if lossy := checkTier(t, ds.Store, want, rounded); len(lossy) != 2*(12-2-2) {
				t.Errorf("trial %d: %d files lossy after the tier, want %d", trial, len(lossy), 2*(12-2-2))
			}
		}
		rep, err := ds.Store.Repack(o)
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

// tierFixture writes npy and safetensors series for the tier tests and
// returns each file's content and, for the files the tier may round, the
// content it must round them to.
func tierFixture(t testing.TB, s *Store, saves int, from ...int) (exact, rounded map[string][]byte) {
	t.Helper()
	exact, rounded = map[string][]byte{}, map[string][]byte{}
	first := 0 // files from: the saves before are in the store already
	if len(from) > 0 {
		first = from[0]
	}
	series := ckpttest.TrainingSeries(21, 90_000, saves)
	st := ckpttest.TrainingSeries(22, 70_000, saves)
	round := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = encode.RoundBF16(x)
		}
		return out
	}
	for i := first; i < saves; i++ {
		name := fmt.Sprintf("w-%02d.npy", i)
		exact[name] = ckpttest.NpyFile(series[i])
		rounded[name] = ckpttest.NpyFile(round(series[i]))
		writeFile(t, s, name, exact[name], 1<<16)
		sn := fmt.Sprintf("m-%02d.safetensors", i)
		half := len(st[i]) / 2
		exact[sn] = ckpttest.SafetensorsFile([]ckpttest.Tensor{{Name: "a.weight", Vals: st[i][:half]}, {Name: "b.weight", Vals: st[i][half:]}})
		rounded[sn] = ckpttest.SafetensorsFile([]ckpttest.Tensor{{Name: "a.weight", Vals: round(st[i][:half])}, {Name: "b.weight", Vals: round(st[i][half:])}})
		writeFile(t, s, sn, exact[sn], 1<<16)
	}
	return exact, rounded
}

// checkTier checks every file against the tier: exact content and
// "exact" fidelity, or (for a file the tier may round) the rounded content
// and "bf16". It returns the names found lossy. No exact version may be
// coded against a lossy one.
func checkTier(t testing.TB, s *Store, exact, rounded map[string][]byte) map[string]bool {
	t.Helper()
	lossy := map[string]bool{}
	for name, b := range exact {
		got := readFile(t, s, name)
		info := fileInfo(t, s, name)
		switch {
		case bytes.Equal(got, b) && info.Fidelity == "exact":
		case rounded[name] != nil && bytes.Equal(got, rounded[name]) && info.Fidelity == "bf16":
			lossy[name] = true
		default:
			t.Fatalf("%s: %d bytes, fidelity %s: neither its exact nor its rounded content", name, len(got), info.Fidelity)
		}
	}
	err := s.view(func(tx *txn) error {
		return tx.mtx.ForEachVersion(func(v *meta.Version) error {
			if v.Fidelity != "" || v.Ref == 0 {
				return nil
			}
			ref, err := tx.mtx.Version(v.Ref)
			if err != nil {
				return err
			}
			if ref.Fidelity != "" {
				t.Errorf("exact version %d (%s) is coded against lossy version %d (%s)", v.ID, v.Path, ref.ID, ref.Path)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return lossy
}

func TestRepackTier(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	const saves = 16
	exact, rounded := tierFixture(t, s, saves)
	tier := RepackOptions{MaxDepth: 2, Lossy: encode.LossyBF16, ExactNewest: 3, ExactEvery: 5}
	dry := tier
	dry.DryRun = true
	if rep, err := s.Repack(dry); err != nil || rep.StoredAfter != rep.StoredBefore || rep.Recoded != 0 {
		t.Fatalf("dry run: %v %+v", err, rep)
	}
	if lossy := checkTier(t, s, exact, rounded); len(lossy) != 0 {
		t.Fatalf("a dry run tiered %v", lossy)
	}
	rep, err := s.Repack(tier)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tier: stored %d -> %d bytes, worst decodes %d -> %d, %d re-coded", rep.StoredBefore, rep.StoredAfter,
		rep.WorstDecodesBefore, rep.WorstDecodesAfter, rep.Recoded)
	lossy := checkTier(t, s, exact, rounded)
	for name := range exact {
		var i int
		fmt.Sscanf(name[2:4], "%d", &i)
		if want := !tier.keepsExact(i, saves); lossy[name] != want {
			t.Errorf("%s (file %d of %d): lossy %v, want %v", name, i, saves, lossy[name], want)
		}
	}
	mustCheck(t, s, true)
	if rep.StoredAfter >= rep.StoredBefore || rep.WorstDecodesAfter > 3 {
		t.Errorf("tiered store: %d bytes after %d, reads of %d decodes", rep.StoredAfter, rep.StoredBefore, rep.WorstDecodesAfter)
	}
	for _, f := range rep.Families {
		if f.Tiered != saves-5 || f.Lossy != saves-5 {
			t.Errorf("family %s: %d tiered now, %d lossy, want %d", f.Name, f.Tiered, f.Lossy, saves-5)
		}
	}

	// Again: nothing more to tier; a wider bound re-plans losslessly.
	again, err := s.Repack(tier)
	if err != nil || again.Recoded != 0 {
		t.Fatalf("the same tier again re-coded %d versions (%v)", again.Recoded, err)
	}
	tier.MaxDepth = 6
	if _, err := s.Repack(tier); err != nil {
		t.Fatal(err)
	}
	if got := checkTier(t, s, exact, rounded); len(got) != len(lossy) {
		t.Fatalf("after a re-plan %d files lossy, before %d", len(got), len(lossy))
	}
	mustCheck(t, s, true)

	// The store goes on: the next save codes against an exact file.
	next := ckpttest.TrainingSeries(21, 90_000, saves+1)[saves]
	name := fmt.Sprintf("w-%02d.npy", saves)
	exact[name] = ckpttest.NpyFile(next)
	writeFile(t, s, name, exact[name], 1<<16)
	checkTier(t, s, exact, rounded)
	mustCheck(t, s, true)
}

// TestRepackTierStopsCleanly stops a tiering repack after every swap: each
// file reads back exact or wholly tiered, as its mark says, after each. The
// tier swaps one part of its plan at a time (at most maxLossyPart files), so
// some stops leave a family partly tiered.
func TestRepackTierStopsCleanly(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	exact, rounded := tierFixture(t, s, 12)
	stop := errors.New("stop")
	partly := 0
	for n := 1; ; n++ {
		_, err := s.Repack(RepackOptions{MaxDepth: 1, Lossy: encode.LossyBF16, ExactNewest: 2, afterSwap: func(swapped int) error {
			if swapped > maxLossyPart(1) {
				t.Errorf("one swap re-coded %d versions; a part of the plan holds at most %d", swapped, maxLossyPart(1))
			}
			return stop
		}})
		lossy := checkTier(t, s, exact, rounded)
		if w := countPrefix(lossy, "w-"); w > 0 && w < 10 {
			partly++
		}
		mustCheck(t, s, false)
		if err == nil {
			break
		}
		if !errors.Is(err, stop) {
			t.Fatal(err)
		}
		if n > 80 {
			t.Fatal("repack never finished")
		}
	}
	if lossy := checkTier(t, s, exact, rounded); len(lossy) != 2*10 {
		t.Fatalf("%d files lossy, want 20", len(lossy))
	}
	if partly == 0 {
		t.Error("no stop left the npy family partly tiered: the tier swapped it whole")
	}
	mustCheck(t, s, true)
}

// countPrefix counts the names in set that start with prefix.
func countPrefix(set map[string]bool, prefix string) int {
	n := 0
	for name := range set {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// TestRepackGoldenStores repacks a copy of every golden store (each format
// version: a torch series, an .npy, hard links, xattrs, a symlink, a
// sparse file) at bounds 0 and 5: every file keeps its recorded hash, and
// fsck --deep is clean. A bf16 tier over every file then leaves fsck clean
// and the files without float32 tensors as they were.
func TestRepackGoldenStores(t *testing.T) {
	for _, name := range goldenStores {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			copyDir(t, filepath.Join("testdata", name), dir)
			ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: policy.Default()}, StoredPolicy: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			hashes := goldenHashes(t, filepath.Join("testdata", name+".manifest"))
			for _, k := range []int{0, 5} {
				if _, err := ds.Repack(RepackOptions{MaxDepth: k}); err != nil {
					t.Fatal(err)
				}
				for p, want := range hashes {
					if got := fileHash(t, ds.Store, p); got != want {
						t.Fatalf("max depth %d: %s: sha256 %s, want %s", k, p, got, want)
					}
				}
				mustCheck(t, ds.Store, true)
			}
			rep, err := ds.Repack(RepackOptions{MaxDepth: 3, Lossy: encode.LossyBF16})
			if err != nil {
				t.Fatal(err)
			}
			tiered := 0
			for _, f := range rep.Families {
				tiered += f.Tiered
			}
			if tiered == 0 {
				t.Error("a tier of every file rounded none")
			}
			for p, want := range hashes {
				n := lookupPath(t, ds.Store, p)
				info, err := ds.Info(n.Ino)
				if err != nil {
					t.Fatal(err)
				}
				if got := fileHash(t, ds.Store, p); (got == want) != (info == nil || info.Fidelity == "exact") {
					t.Errorf("%s: fidelity %v, content unchanged %v", p, info, got == want)
				}
			}
			mustCheck(t, ds.Store, true)
		})
	}
}

// goldenHashes reads a golden manifest's file lines: path to sha256.
func goldenHashes(t *testing.T, manifest string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "symlink" || f[0] == "xattr" || f[0] == "links" {
			continue
		}
		out[strings.TrimPrefix(f[1], "./")] = f[0]
	}
	return out
}

func fileHash(t *testing.T, s *Store, p string) string {
	t.Helper()
	r, err := s.OpenVersion(lookupPath(t, s, p).Version)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, r.Size())); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestSwapCodingRefusesCycle: a version is never coded against one built
// on it.
func TestSwapCodingRefusesCycle(t *testing.T) {
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	series := ckpttest.TrainingSeries(3, 70_000, 2)
	writeFile(t, s, "a-0.npy", ckpttest.NpyFile(series[0]), 1<<16)
	writeFile(t, s, "a-1.npy", ckpttest.NpyFile(series[1]), 1<<16)
	first := lookupPath(t, s, "a-0.npy").Version
	second := lookupPath(t, s, "a-1.npy").Version
	rc, err := s.recode(first, second, recodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.v.Ref != second {
		t.Fatalf("re-coded against %d, want %d", rc.v.Ref, second)
	}
	err = s.update(func(tx *txn) error { return tx.swapCoding(rc) })
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("swap into a cycle: %v", err)
	}
	s.dropRecoded(rc)
	mustCheck(t, s, true)
}

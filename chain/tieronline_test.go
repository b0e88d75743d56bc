package chain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// onlineTier is the tier a mount applies in these tests: the newest 3
// files of each family and every 5th exact.
func onlineTier(busy func(meta.Ino) bool) RepackOptions {
	return RepackOptions{MaxDepth: policy.DefaultMaxDepth, Lossy: encode.LossyBF16, ExactNewest: 3, ExactEvery: 5,
		Online: true, Busy: busy}
}

// fileIndex is the save number in a tierFixture name (w-07.npy: 7).
func fileIndex(name string) int {
	var i int
	fmt.Sscanf(name[2:4], "%d", &i)
	return i
}

// checkLeftExact checks that a file outside the exact tier that a pass
// left exact is one an exact file is coded against: the only reason an
// online tier leaves it (its format allowing).
func checkLeftExact(t *testing.T, s *Store, lossy map[string]bool, exact map[string][]byte, n int, o RepackOptions) {
	t.Helper()
	versions := map[string]meta.VersionID{}
	for name := range exact {
		in, err := s.Names().Lookup(meta.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = in.Version
	}
	err := s.view(func(tx *txn) error {
		_, dependents, err := tx.versionGraph()
		if err != nil {
			return err
		}
		for name, id := range versions {
			i := fileIndex(name)
			if lossy[name] || o.keepsExact(i, n) {
				continue
			}
			needed := false
			for _, d := range dependents[id] {
				v, err := tx.mtx.Version(d)
				if err != nil {
					return err
				}
				needed = needed || v.Fidelity == ""
			}
			if !needed {
				t.Errorf("%s (file %d of %d) is exact, and no exact version is coded against it", name, i, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTierOnline runs a mount's tier after every save: the newest files
// stay exact, a file leaves the exact tier once no exact file is coded
// against it, and nothing is re-coded but the files tiered and the every
// 5th files rebased once.
func TestTierOnline(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	o := onlineTier(nil)
	const saves = 16
	exact, rounded := map[string][]byte{}, map[string][]byte{}
	recoded, passes := 0, 0
	var lossy map[string]bool
	for n := 1; n <= saves; n++ {
		// One save more of each series; the tier then runs as a mount runs it.
		e, r := tierFixture(t, s, n, n-1)
		for k, v := range e {
			exact[k] = v
		}
		for k, v := range r {
			rounded[k] = v
		}
		before, _, err := s.Figures()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Repack(o)
		if err != nil {
			t.Fatal(err)
		}
		passes++
		recoded += rep.Recoded
		lossy = checkTier(t, s, exact, rounded)
		for name := range lossy {
			if i := fileIndex(name); o.keepsExact(i, n) {
				t.Errorf("after save %d: %s (file %d) is in the exact tier, and lossy", n, name, i)
			}
		}
		checkLeftExact(t, s, lossy, exact, n, o)
		after, _, err := s.Figures()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Recoded > 0 && after.StoredBytes >= before.StoredBytes {
			t.Errorf("after save %d: the tier re-coded %d files, and the store grew from %d to %d bytes", n, rep.Recoded, before.StoredBytes, after.StoredBytes)
		}
	}
	everyFifth := 2 * (saves / 5)
	t.Logf("%d passes: %d of %d files lossy, %d re-codings", passes, len(lossy), len(exact), recoded)
	if len(lossy) < 2*(saves-3-everyFifth-(policy.DefaultMaxDepth+1)) {
		t.Errorf("only %d files lossy of %d", len(lossy), len(exact))
	}
	if recoded > len(lossy)+everyFifth {
		t.Errorf("%d re-codings for %d lossy files and %d rebased at most: the tier re-coded files twice", recoded, len(lossy), everyFifth)
	}
	again, err := s.Repack(o)
	if err != nil || again.Recoded != 0 {
		t.Fatalf("a pass with nothing to tier re-coded %d files (%v)", again.Recoded, err)
	}
	mustCheck(t, s, true)
}

// busySet is the open files of a test, as the mount reports them.
type busySet struct {
	mu   sync.Mutex
	inos map[meta.Ino]int
}

func (b *busySet) add(ino meta.Ino, d int) {
	b.mu.Lock()
	b.inos[ino] += d
	b.mu.Unlock()
}

func (b *busySet) busy(ino meta.Ino) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inos[ino] > 0
}

// TestTierOnlineWaits: a file open, or a version pinned by a read, keeps
// itself and every file its reads decode exact until it is let go.
func TestTierOnlineWaits(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	const saves = 12
	exact, rounded := tierFixture(t, s, saves, 0)
	open := &busySet{inos: map[meta.Ino]int{}}
	o := onlineTier(open.busy)
	lookup := func(name string) *meta.Inode {
		n, err := s.Names().Lookup(meta.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// w-06 open; m-06's version held (a read's pin).
	open.add(lookup("w-06.npy").Ino, 1)
	release, err := s.HoldContent(lookup("m-06.safetensors").Ino)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Repack(o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Waiting != 2 {
		t.Errorf("%d families waiting, want 2", rep.Waiting)
	}
	lossy := checkTier(t, s, exact, rounded)
	for _, name := range []string{"w-06.npy", "m-06.safetensors"} {
		if lossy[name] {
			t.Errorf("%s was tiered while in use", name)
		}
		// Nor any file its reads decode.
		for id := lookup(name).Version; id != 0; {
			var v *meta.Version
			if err := s.view(func(tx *txn) (err error) { v, err = tx.mtx.Version(id); return err }); err != nil {
				t.Fatal(err)
			}
			if v.Fidelity != "" {
				t.Errorf("%s decodes version %d (%s), tiered under its reader", name, v.ID, v.Path)
			}
			id = v.Ref
		}
	}
	if len(lossy) == 0 {
		t.Error("nothing tiered around the files in use")
	}
	open.add(lookup("w-06.npy").Ino, -1)
	release()
	if rep, err = s.Repack(o); err != nil || rep.Waiting != 0 {
		t.Fatalf("after the files were let go: %d families waiting (%v)", rep.Waiting, err)
	}
	lossy = checkTier(t, s, exact, rounded)
	if !lossy["w-06.npy"] || !lossy["m-06.safetensors"] {
		t.Errorf("files let go stay exact: lossy %v", lossy)
	}
	mustCheck(t, s, true)
}

// TestTierOnlineConcurrent runs tier passes while files are saved and
// read: every read returns a file's exact bytes or its rounded ones, never
// a mix, and the store checks clean at the end.
func TestTierOnlineConcurrent(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	const saves = 14
	open := &busySet{inos: map[meta.Ino]int{}}
	o := onlineTier(open.busy)
	var mu sync.Mutex
	exact, rounded := tierFixture(t, s, 4, 0)
	names := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for k := range exact {
			out = append(out, k)
		}
		return out
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-done:
					return
				default:
				}
				all := names()
				name := all[rng.Intn(len(all))]
				n, err := s.Names().Lookup(meta.RootIno, name)
				if err != nil {
					errs <- err
					return
				}
				open.add(n.Ino, 1) // as the mount counts an open before its reader
				got, err := readAll(s, n.Version, 1+rng.Intn(3)*100_000)
				open.add(n.Ino, -1)
				if err != nil {
					errs <- fmt.Errorf("read %s: %w", name, err)
					return
				}
				mu.Lock()
				ok := bytes.Equal(got, exact[name]) || bytes.Equal(got, rounded[name])
				mu.Unlock()
				if !ok {
					errs <- fmt.Errorf("%s read back neither exact nor rounded", name)
					return
				}
			}
		}(int64(r))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.Repack(o); err != nil {
				errs <- err
				return
			}
		}
	}()
	for n := 5; n <= saves; n++ {
		e, r := tierFixture(t, s, n, n-1)
		mu.Lock()
		for k, v := range e {
			exact[k] = v
		}
		for k, v := range r {
			rounded[k] = v
		}
		mu.Unlock()
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := s.Repack(o); err != nil {
		t.Fatal(err)
	}
	lossy := checkTier(t, s, exact, rounded)
	t.Logf("%d of %d files lossy", len(lossy), len(exact))
	if len(lossy) == 0 {
		t.Error("nothing tiered")
	}
	mustCheck(t, s, true)
}

// readAll reads version id in calls of piece bytes, as a reader of an
// open file does.
func readAll(s *Store, id meta.VersionID, piece int) ([]byte, error) {
	r, err := s.OpenVersion(id)
	if err != nil {
		return nil, err
	}
	out := make([]byte, r.Size())
	for off := 0; off < len(out); off += piece {
		end := min(off+piece, len(out))
		if _, err := r.ReadAt(out[off:end], int64(off)); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return out, nil
}

// TestTierOnlineKill kills online tier passes with SIGKILL at random
// moments (while they plan, or just after a random swap): after each kill
// every file reads exact or wholly rounded as its mark says and fsck finds
// nothing; passes run again until one finishes, and the store then holds
// exactly the lossy files of a pass that was never killed.
func TestTierOnlineKill(t *testing.T) {
	clean := openTestStore(t, "", policy.Default())
	exact, rounded := tierFixture(t, clean.Store, 12)
	if _, err := clean.Store.Repack(onlineTier(nil)); err != nil {
		t.Fatal(err)
	}
	want := checkTier(t, clean.Store, exact, rounded)
	clean.Close()
	if len(want) == 0 {
		t.Fatal("an unkilled pass tiered nothing: the test would test nothing")
	}
	rng := rand.New(rand.NewSource(4242))
	midway := 0
	for trial := 0; trial < 4; trial++ {
		dir := t.TempDir()
		ds := openTestStore(t, dir, policy.Default())
		tierFixture(t, ds.Store, 12)
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
		finished := false
		for round := 0; round < 40 && !finished; round++ {
			var swapped int
			finished, swapped = killRepackVictim(t, rng, []string{repackVictimEnv + "=" + dir, repackVictimOnlineEnv + "=1"},
				100*time.Millisecond, 3)
			if swapped > 0 && !finished {
				midway++
			}
			ds := openTestStore(t, dir, policy.Default())
			checkTier(t, ds.Store, exact, rounded)
			mustCheck(t, ds.Store, true)
			ds.Close()
		}
		if !finished {
			t.Fatalf("trial %d: a pass killed 40 times never finished", trial)
		}
		ds = openTestStore(t, dir, policy.Default())
		if got := checkTier(t, ds.Store, exact, rounded); !maps.Equal(got, want) {
			t.Errorf("trial %d: lossy after the kills %v, a pass never killed %v", trial, got, want)
		}
		ds.Close()
	}
	t.Logf("%d kills between two swaps", midway)
	if midway == 0 {
		t.Error("no kill landed between two swaps: the test tested nothing")
	}
}

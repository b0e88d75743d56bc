package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// npyOf is a .npy file of float32 weights drifting with seed: a format the
// store deltas, whose content a test can regenerate from the seed alone.
func npyOf(seed int) []byte {
	rng := rand.New(rand.NewSource(1))
	vals := make([]float32, 50_000+10_000*(seed%7))
	for i := range vals {
		vals[i] = float32(rng.NormFloat64()*0.05 + float64(seed)*1e-4*math.Sin(float64(i)))
	}
	return seededNpy(seed, vals)
}

// seededNpy is a .npy file of vals whose header records seed (seedOf).
func seededNpy(seed int, vals []float32) []byte {
	return npyFloat32(vals, fmt.Sprintf("'seed': %d", seed))
}

// npyFloat32 is a .npy file of vals; extra goes into the header's dict.
func npyFloat32(vals []float32, extra string) []byte {
	b := bytes.NewBuffer(npyHeader(int64(len(vals)), extra))
	binary.Write(b, binary.LittleEndian, vals)
	return b.Bytes()
}

// seedOf reads the seed back from an npyOf file, or -1.
func seedOf(b []byte) int {
	i := bytes.Index(b, []byte("'seed': "))
	if i < 0 {
		return -1
	}
	s := b[i+8:]
	j := bytes.IndexByte(s, '}')
	if j < 0 {
		return -1
	}
	n, err := strconv.Atoi(string(s[:j]))
	if err != nil {
		return -1
	}
	return n
}

// churn is a workload that records, outside the mount, what it committed:
// an operation counts once its last system call returned, a plain save once
// an fsync of the directory followed it (until then its commit may still
// run in the background, and a crash may leave what the file held before).
type churn struct {
	dir       string
	mu        sync.Mutex
	committed map[string]int // path -> seed
	closed    map[string]int // saved and closed since the last fsync: path -> seed
	inflight  string         // description of the operation under way
	touched   []string       // paths the in-flight operation may have changed
}

func (c *churn) run(rng *rand.Rand, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		seed := rng.Intn(1_000_000)
		var err error
		switch op := rng.Intn(11); {
		case op < 5:
			p := fmt.Sprintf("ckpt-%d.npy", i)
			c.begin("write "+p, p)
			err = os.WriteFile(filepath.Join(c.dir, p), npyOf(seed), 0o644)
			c.end(err, func() { c.closed[p] = seed })
		case op == 10: // fsync of the directory: every save closed before is durable
			c.begin("sync")
			err = fsyncPath(c.dir)
			c.end(err, func() {
				for p, s := range c.closed {
					c.committed[p] = s
				}
				clear(c.closed)
			})
		case op < 7: // atomic save: temp, fsync, rename
			c.begin("atomic latest.npy", "latest.npy", "latest.tmp")
			err = atomicWrite(filepath.Join(c.dir, "latest.tmp"), filepath.Join(c.dir, "latest.npy"), npyOf(seed))
			c.end(err, func() { c.committed["latest.npy"] = seed; delete(c.committed, "latest.tmp") })
		case op < 9:
			victim := c.any(rng)
			if victim == "" {
				continue
			}
			c.begin("delete "+victim, victim)
			err = os.Remove(filepath.Join(c.dir, victim))
			c.end(err, func() { delete(c.committed, victim) })
		default:
			victim := c.any(rng)
			if victim == "" {
				continue
			}
			to := "moved-" + victim
			c.begin("rename "+victim, victim, to)
			err = os.Rename(filepath.Join(c.dir, victim), filepath.Join(c.dir, to))
			c.end(err, func() { c.committed[to] = c.committed[victim]; delete(c.committed, victim) })
		}
		if err != nil {
			return // the daemon is gone
		}
	}
}

func (c *churn) begin(what string, paths ...string) {
	c.mu.Lock()
	c.inflight, c.touched = what, paths
	c.mu.Unlock()
}

func (c *churn) end(err error, commit func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		commit()
		c.inflight, c.touched = "", nil
	}
}

func (c *churn) any(rng *rand.Rand) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for p := range c.committed {
		if _, saving := c.closed[p]; !saving && !strings.HasPrefix(p, "moved-moved-") {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[rng.Intn(len(names))]
}

func atomicWrite(tmp, final string, data []byte) error {
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, final)
}

// verify checks the remounted tree against what the churn committed: every
// committed file intact; any other file is one the interrupted operation was
// writing, holding nothing (created, not committed) or a whole save.
func (c *churn) verify(t *testing.T) {
	t.Helper()
	touched := map[string]bool{}
	for _, p := range c.touched {
		touched[p] = true
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, e := range ents {
		present[e.Name()] = true
		b, err := os.ReadFile(filepath.Join(c.dir, e.Name()))
		if err != nil {
			t.Fatalf("read %s after the crash: %v", e.Name(), err)
		}
		seed, committed := c.committed[e.Name()]
		saved, closed := c.closed[e.Name()]
		switch {
		case closed && !touched[e.Name()]:
			// Its commit may not have landed: the new save whole, or what the
			// file held before (the committed save, or nothing), never a mix.
			if !bytes.Equal(b, npyOf(saved)) && len(b) != 0 && !(committed && bytes.Equal(b, npyOf(seed))) {
				t.Fatalf("%s, closed and not fsynced, holds %d bytes that are neither its save nor what it held (in flight: %s)", e.Name(), len(b), c.inflight)
			}
		case committed && !touched[e.Name()]:
			if !bytes.Equal(b, npyOf(seed)) {
				t.Fatalf("committed %s damaged by the crash (in flight: %s)", e.Name(), c.inflight)
			}
		case len(b) == 0 && touched[e.Name()]:
			// created by the interrupted operation, never committed
		default:
			s := seedOf(b)
			if s < 0 || !bytes.Equal(b, npyOf(s)) {
				t.Fatalf("%s holds %d bytes that are no complete save (in flight: %s)", e.Name(), len(b), c.inflight)
			}
			if !committed && !touched[e.Name()] {
				t.Fatalf("%s appeared though nothing committed it (in flight: %s)", e.Name(), c.inflight)
			}
		}
	}
	for _, m := range []map[string]int{c.committed, c.closed} {
		for p := range m {
			if !present[p] && !touched[p] {
				t.Fatalf("%s lost in the crash (in flight: %s)", p, c.inflight)
			}
		}
	}
	// Resynchronise the model with what survived the interrupted operation.
	next := map[string]int{}
	for p := range present {
		b, _ := os.ReadFile(filepath.Join(c.dir, p))
		if s := seedOf(b); s >= 0 {
			next[p] = s
		} else {
			os.Remove(filepath.Join(c.dir, p))
		}
	}
	c.committed, c.inflight, c.touched = next, "", nil
	clear(c.closed)
}

// TestKillDaemonDuringWorkload kills the daemon with SIGKILL at random
// moments of a workload of saves, atomic renames, deletes and renames, then
// remounts and checks that committed files are intact, nothing half-written
// is visible, and fsck --deep finds no problem and no leaked page.
func TestKillDaemonDuringWorkload(t *testing.T) {
	trials := 8
	if full() {
		trials = 50
	}
	m := newMount(t)
	c := &churn{dir: m.path("w"), committed: map[string]int{}, closed: map[string]int{}}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(99))
	for trial := 0; trial < trials; trial++ {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { c.run(rand.New(rand.NewSource(int64(trial))), stop); close(done) }()
		time.Sleep(time.Duration(100+rng.Intn(900)) * time.Millisecond)
		m.kill9()
		close(stop)
		<-done
		fsck(t, m.store)
		m.start()
		t.Logf("trial %d: killed during %q with %d files committed", trial, c.inflight, len(c.committed))
		c.verify(t)
	}
	m.stop()
	fsck(t, m.store)
}

// TestRemountRightAfterKill (issue 21 item 11): right after the daemon is
// killed, mounting the same mount point again clears the dead mount, says
// so, and mounts; it said the mount point was busy for about a second (the
// kernel answered stat of the dead mount from its attribute cache).
func TestRemountRightAfterKill(t *testing.T) {
	m := newMount(t)
	want := npyOf(3)
	if err := os.WriteFile(m.path("kept.npy"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	// Only what was fsynced survives a killed daemon: a closed file's
	// commit may still run in the background.
	if err := fsyncPath(m.path("kept.npy")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.dir); err != nil { // the root's attributes cached
		t.Fatal(err)
	}
	for trial := 0; trial < 3; trial++ {
		pid := pidOfMount(t, m.dir)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ckptfsBin, "mount", "--store", m.store, m.dir).CombinedOutput()
		if err != nil {
			t.Fatalf("trial %d: mount right after the daemon was killed: %v\n%s", trial, err, out)
		}
		if !strings.Contains(string(out), "dead ckptfs mount") {
			t.Errorf("trial %d: mount did not say it cleared the dead mount:\n%s", trial, out)
		}
		if b, err := os.ReadFile(m.path("kept.npy")); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("trial %d: file after remount: %v", trial, err)
		}
	}
}

// TestFullDevice fills a small simulated SSD: writes fail with ENOSPC,
// earlier files stay intact, deleting frees space and writing works again.
func TestFullDevice(t *testing.T) {
	m := newMount(t, "--device-size", "64MiB")
	rng := rand.New(rand.NewSource(5))
	keep := make([]byte, 3<<20)
	rng.Read(keep)
	if err := os.WriteFile(m.path("keep.bin"), keep, 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	var failed error
	for i := 0; i < 100 && failed == nil; i++ {
		data := make([]byte, 4<<20)
		rng.Read(data) // incompressible
		name := m.path(fmt.Sprintf("fill-%d.bin", i))
		names = append(names, name)
		failed = os.WriteFile(name, data, 0o644)
	}
	if !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("filling a 64 MiB device: %v, want ENOSPC", failed)
	}
	if b, err := os.ReadFile(m.path("keep.bin")); err != nil || !bytes.Equal(b, keep) {
		t.Fatalf("earlier file damaged by the full device: %v", err)
	}
	for _, n := range names {
		os.Remove(n)
	}
	// Freed space returns once the kernel forgets the unlinked inodes.
	var err error
	for try := 0; try < 50; try++ {
		if err = os.WriteFile(m.path("after.bin"), keep, 0o644); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after freeing space: %v", err)
	}
	m.stop()
	fsck(t, m.store)
}

// TestUnmountBusyAndSecondDaemon: unmounting with a file open is refused
// (or done lazily on request, the file finishing its writes), a second
// daemon on the same store is refused, and a remount finds everything.
func TestUnmountBusyAndSecondDaemon(t *testing.T) {
	m := newMount(t)
	other := filepath.Join(t.TempDir(), "mnt2")
	os.Mkdir(other, 0o755)
	out, err := exec.Command(ckptfsBin, "mount", "--store", m.store, other).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another ckptfs daemon") {
		t.Fatalf("second daemon on one store: %v %s", err, out)
	}
	out, err = exec.Command(ckptfsBin, "mount", "--store", t.TempDir(), m.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "busy") {
		t.Fatalf("mount on a busy mount point: %v %s", err, out)
	}
	out, err = exec.Command(ckptfsBin, "mount", "--store", t.TempDir(), filepath.Join(other, "missing")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not exist") {
		t.Fatalf("mount on a missing mount point: %v %s", err, out)
	}

	f, err := os.Create(m.path("open.npy"))
	if err != nil {
		t.Fatal(err)
	}
	first := npyOf(1)
	f.Write(first[:1000])
	out, err = exec.Command(ckptfsBin, "umount", m.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "still open") {
		t.Fatalf("umount with an open file: %v %s", err, out)
	}
	if out, err := exec.Command(ckptfsBin, "umount", "--lazy", "--wait", "0s", m.dir).CombinedOutput(); err != nil {
		t.Logf("lazy umount: %s", out)
	}
	// The open descriptor still works; closing it commits and lets the
	// daemon finish.
	if _, err := f.Write(first[1000:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if out, err := exec.Command(ckptfsBin, "fsck", "--store", m.store).CombinedOutput(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("store still busy or damaged after the last file closed: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.start()
	if b, err := os.ReadFile(m.path("open.npy")); err != nil || !bytes.Equal(b, first) {
		t.Fatalf("file written across a lazy unmount: %v", err)
	}
}

// TestCorruptedChunk flips bits in the device's backing file under one
// file: reading it fails with EIO and the log names it; others read fine.
func TestCorruptedChunk(t *testing.T) {
	m := newMount(t)
	m.allowErrors(`checksum mismatch`, `msg="corrupt data"`)
	a, b := npyOf(11), npyOf(12)
	os.WriteFile(m.path("victim.npy"), a, 0o644)
	os.WriteFile(m.path("bystander.npy"), b, 0o644)
	pages, err := getxattr(m.path("victim.npy"), "user.ckptfs.pages")
	if err != nil || pages == "" {
		t.Fatalf("user.ckptfs.pages: %q %v", pages, err)
	}
	var start, n int64
	fmt.Sscanf(strings.Split(pages, ",")[0], "%d+%d", &start, &n)
	m.stop()
	dev, err := os.OpenFile(filepath.Join(m.store, "device.img"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0x5a}, 512)
	if _, err := dev.WriteAt(junk, (start+n/2)*4096+100); err != nil {
		t.Fatal(err)
	}
	dev.Close()
	m.start()
	if _, err := os.ReadFile(m.path("victim.npy")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading a corrupted file: %v, want EIO", err)
	}
	if got, err := os.ReadFile(m.path("bystander.npy")); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("other file: %v", err)
	}
	logText, _ := os.ReadFile(filepath.Join(m.store, "ckptfs.log"))
	if !strings.Contains(string(logText), "victim.npy") {
		t.Fatalf("daemon log does not name the damaged file:\n%s", logText)
	}
	m.stop()
	out, err := exec.Command(ckptfsBin, "fsck", "--deep", "--store", m.store).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "corrupt-chunk") {
		t.Fatalf("fsck --deep missed the corruption: %v\n%s", err, out)
	}
}

// bigNpyOf is npyOf with n values: large enough (n*4 bytes past 1 MiB) that
// close returns before the commit, which runs in the background.
func bigNpyOf(seed, n int) []byte {
	rng := rand.New(rand.NewSource(int64(seed)))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * 0.05)
	}
	return seededNpy(seed, vals)
}

// TestKillDuringBackgroundCommit: the daemon killed while the commits of
// files closed (not fsynced) still run in the background. Every file closed
// before the kill holds its new content after the remount, whole: its
// staging file was marked closed at its close, and the next open of the
// store (fsck here) ingests it. What was fsynced is there too.
func TestKillDuringBackgroundCommit(t *testing.T) {
	const n = 16 << 20 // 64 MiB per file: its encoding outlasts the closes
	trials := 3
	if full() {
		trials = 10
	}
	m := newMount(t)
	names := []string{"a.npy", "b.npy", "c.npy"}
	for i, name := range names {
		if err := atomicWrite(m.path(name+".tmp"), m.path(name), bigNpyOf(i, n)); err != nil {
			t.Fatal(err)
		}
	}
	recovered := 0
	for trial := 1; trial <= trials; trial++ {
		synced := fmt.Sprintf("synced-%d.npy", trial)
		if err := atomicWrite(m.path(synced+".tmp"), m.path(synced), bigNpyOf(100+trial, n)); err != nil {
			t.Fatal(err)
		}
		closed := map[string]int{}
		for i, name := range append(names, fmt.Sprintf("new-%d.npy", trial)) {
			seed := 1000*trial + i
			if err := os.WriteFile(m.path(name), bigNpyOf(seed, n), 0o644); err != nil {
				t.Fatal(err)
			}
			closed[name] = seed
		}
		m.kill9()
		// The saves whose commit had not landed: left closed in staging.
		staged, _ := filepath.Glob(filepath.Join(m.store, "staging", "*.closed"))
		recovered += len(staged)
		t.Logf("trial %d: %d saves closed and not yet committed at the kill", trial, len(staged))
		fsck(t, m.store)
		m.start()
		for name, seed := range closed {
			b, err := os.ReadFile(m.path(name))
			if err != nil {
				t.Fatalf("trial %d: read %s, closed before the kill: %v", trial, name, err)
			}
			if !bytes.Equal(b, bigNpyOf(seed, n)) {
				t.Fatalf("trial %d: %s, closed before the kill, holds %d bytes that are not its save (seed %d found)", trial, name, len(b), seedOf(b))
			}
		}
		for s := 1; s <= trial; s++ {
			name := fmt.Sprintf("synced-%d.npy", s)
			if b, err := os.ReadFile(m.path(name)); err != nil || !bytes.Equal(b, bigNpyOf(100+s, n)) {
				t.Fatalf("trial %d: fsynced %s lost or damaged by the crash (%v)", trial, name, err)
			}
		}
	}
	if recovered == 0 {
		t.Fatal("no kill caught a commit in the background: the test did not test it")
	}
	m.stop()
	fsck(t, m.store)
}

// fsyncPath opens path and fsyncs it: on a mount, that waits for the
// file's commit and makes the store durable.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
)

// memoryLimitKB is the bound issues 5, 6 and 27 set on peak RSS: 300 MB.
const memoryLimitKB = 300_000_000 >> 10

// bigCheckpoint writes an .npy of size bytes of drifting float32 values,
// streamed, so the test itself stays small.
func bigCheckpoint(t *testing.T, dir string, size int64) string {
	t.Helper()
	path := filepath.Join(dir, "ckpt-1.npy")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	n := (size - 128) / 4
	w.Write(npyHeader(n, ""))
	var b [4]byte
	x := uint32(1)
	for i := int64(0); i < n; i++ {
		x = x*1664525 + 1013904223
		v := float32(math.Sin(float64(i)*1e-3))*0.05 + float32(x>>8)/(1<<24)*1e-3
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		w.Write(b[:])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

// npyHeader is the header of an .npy file of n float32 values; extra goes
// into the header's dict.
func npyHeader(n int64, extra string) []byte {
	h := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), %s}", n, extra)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(h)+1))
	b.WriteString(h + "\n")
	return b.Bytes()
}

func bigSize() int64 {
	if full() {
		return 4 << 30
	}
	return 1 << 30
}

// TestReplayMemoryBounded: replaying a checkpoint far larger than the
// memory bound streams through (peak RSS under 300 MB).
func TestReplayMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	file := bigCheckpoint(t, dir, bigSize())
	maxrss := peakRSSOf(t, ckptfsBin, "replay", "--quiet", "--json", "--work-dir", dir, file)
	t.Logf("replay of %d MiB: peak RSS %d MiB", bigSize()>>20, maxrss>>10)
	if maxrss > memoryLimitKB {
		t.Fatalf("replay peak RSS %d KiB, bound %d KiB", maxrss, memoryLimitKB)
	}
}

// TestDaemonMemoryBounded: with the default settings, the daemon's memory
// does not follow the size of the files saved: its peak RSS stays under
// 300 MB while a checkpoint of 1 GiB (4 GiB with CKPTFS_FULL) is saved,
// saved again under a new name (coded against the first, whose chunks the
// reference tier cannot hold: they are rebuilt from the device), and read
// back.
func TestDaemonMemoryBounded(t *testing.T) {
	m := newMount(t)
	src := bigCheckpoint(t, t.TempDir(), bigSize())
	for _, name := range []string{"ckpt-1.npy", "ckpt-2.npy"} {
		if out, err := exec.Command("cp", src, m.path(name)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", name, err, out)
		}
	}
	if ref, err := getxattr(m.path("ckpt-2.npy"), "user.ckptfs.reference"); err != nil || ref == "0" || ref == "" {
		t.Errorf("ckpt-2.npy was not coded against ckpt-1.npy (reference %q, %v)", ref, err)
	}
	if !sameContent(t, src, m.path("ckpt-2.npy")) {
		t.Fatal("read back differs")
	}
	hwm := vmHWM(t, pidOfMount(t, m.dir))
	t.Logf("daemon peak RSS after saving %d MiB twice and reading it back: %d MiB (%s)", bigSize()>>20, hwm>>10, daemonRuntime(t, m))
	if hwm > memoryLimitKB {
		t.Fatalf("daemon peak RSS %d KiB, bound %d KiB", hwm, memoryLimitKB)
	}
}

// daemonRuntime describes the daemon's CPU, its collector's share and its
// heap limit, from its live report: what a lower limit costs.
func daemonRuntime(t *testing.T, m *mount) string {
	r := runtimeOf(t, m)
	return fmt.Sprintf("daemon CPU %.1f s, %.0f%% of it collecting garbage, heap limit %d MiB", r.CPUSeconds, 100*r.GCShare, r.MemoryLimit>>20)
}

// runtimeOf is the runtime section of m's live report.
func runtimeOf(t *testing.T, m *mount) *chain.Runtime {
	t.Helper()
	var rep struct {
		Runtime *chain.Runtime `json:"runtime"`
	}
	if m.liveStats(&rep); rep.Runtime == nil {
		t.Fatal("the live report has no runtime")
	}
	return rep.Runtime
}

func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%d", &kb)
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// peakRSSEnv makes the test binary run the command in its arguments and
// print the command's own peak RSS (KiB), as a small fresh process.
const peakRSSEnv = "CKPTFS_TEST_PEAKRSS"

// peakRSSOf runs a command and returns its own peak RSS in KiB. Linux
// carries a process's peak RSS across vfork and exec, so a command started
// by this test process would report at least this process's peak (hundreds
// of MiB after the crash tests); it is started by a fresh copy of the test
// binary instead, whose own few MiB are the most the figure is inflated by.
func peakRSSOf(t *testing.T, name string, args ...string) int64 {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), peakRSSEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	kib, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("%s: peak RSS: %v (%q)", name, err, out)
	}
	return kib
}

// servePeakRSS runs args and prints its peak RSS (KiB) last; it returns
// the exit status.
func servePeakRSS(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	return 0
}

// TestDaemonMemoryManyWriters (issue 27): with the default settings, 24
// float32 .npy files of 100 MB rewritten in place at once (opened without
// O_TRUNC, written over in blocks out of order, closed) keep the daemon's
// peak RSS under 300 MB: the saves wait in the page cache, in their staging
// files, not in the daemon, and the reference tier does not grow with them.
// The daemon runs once as it comes and once with GOMAXPROCS=16, as on a
// machine with many cores, where it runs as many encode workers.
func TestDaemonMemoryManyWriters(t *testing.T) {
	for _, procs := range []string{"", "16"} {
		t.Run("GOMAXPROCS="+procs, func(t *testing.T) {
			var env []string
			if procs != "" {
				env = []string{"GOMAXPROCS=" + procs}
			}
			manyWritersInPlace(t, newMountEnv(t, env))
		})
	}
	// Where the daemon writes the staging files itself (no passthrough:
	// not root, an older kernel), every byte crosses it.
	t.Run("daemon-written", func(t *testing.T) {
		manyWritersInPlace(t, newMount(t, "--no-passthrough"))
	})
}

func manyWritersInPlace(t *testing.T, m *mount) {
	const files, size = 24, 100 << 20
	hdr := npyHeader((size-128)/4, "")
	base := make([]byte, size)
	copy(base, hdr)
	rng := rand.New(rand.NewSource(24))
	for off := len(hdr); off+4 <= size; off += 4 {
		v := float32(math.Sin(float64(off)*1e-5))*0.05 + float32(rng.NormFloat64())*1e-3
		binary.LittleEndian.PutUint32(base[off:], math.Float32bits(v))
	}
	// content is file k's bytes after a round of training: every 16th
	// value moved a little, differently for each file and round.
	content := func(k, round int) []byte {
		b := append([]byte(nil), base...)
		step := float32(k+1) * float32(round+1) * 1e-5
		for off := len(hdr); off+4 <= size; off += 64 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v+step))
		}
		return b
	}
	name := func(k int) string { return m.path(fmt.Sprintf("rank-%d.npy", k)) }
	for k := 0; k < files; k++ {
		if err := os.WriteFile(name(k), content(k, 0), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsyncPath(m.dir); err != nil {
		t.Fatal(err)
	}
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
			data := content(k, 1)
			const block = 4 << 20
			for _, b := range rand.New(rand.NewSource(int64(k))).Perm((size + block - 1) / block) {
				if _, err := f.WriteAt(data[b*block:min((b+1)*block, size)], int64(b*block)); err != nil {
					errs <- err
					f.Close()
					return
				}
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
	if err := fsyncPath(m.dir); err != nil {
		t.Fatal(err)
	}
	hwm := vmHWM(t, pidOfMount(t, m.dir))
	t.Logf("daemon peak RSS with %d files of %d MiB rewritten in place at once: %d MiB (%s)", files, size>>20, hwm>>10, daemonRuntime(t, m))
	if hwm > memoryLimitKB {
		t.Fatalf("daemon peak RSS %d KiB, bound %d KiB", hwm, memoryLimitKB)
	}
	for _, k := range []int{0, files - 1} {
		got, err := os.ReadFile(name(k))
		if err != nil || !bytes.Equal(got, content(k, 1)) {
			t.Fatalf("rank-%d.npy after the rewrite: %v", k, err)
		}
		if ref, err := getxattr(name(k), "user.ckptfs.reference"); err != nil || ref == "0" || ref == "" {
			t.Errorf("rank-%d.npy's rewrite was not coded against its previous save (reference %q, %v)", k, ref, err)
		}
	}
}

// TestDaemonMemoryManySmallFiles: 5000 small files, each its own family (a
// torch.distributed.checkpoint directory of many ranks, a dataset), keep
// the daemon's peak RSS under the bound, and their commits keep up with
// the writer, whose saves all end whole. The reference tier kept each such
// file's chunk in a 64 KiB buffer counted as its few bytes, past the heap
// limit; the commits queued behind polled every millisecond; creates slowed
// as the files grew, and the collector took half the daemon's CPU.
func TestDaemonMemoryManySmallFiles(t *testing.T) {
	m := newMount(t)
	const files = 5000
	dir := m.path("ranks")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := func(k int) []byte { return append(bytes.Repeat([]byte("x"), 56), fmt.Sprintf("%08d", k)...) }
	for k := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("__%d_0.distcp", k)), body(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsyncPath(dir); err != nil { // waits for every commit
		t.Fatal(err)
	}
	hwm := vmHWM(t, pidOfMount(t, m.dir))
	t.Logf("daemon peak RSS with %d small files saved: %d MiB (%s)", files, hwm>>10, daemonRuntime(t, m))
	if hwm > memoryLimitKB {
		t.Fatalf("daemon peak RSS %d KiB, bound %d KiB", hwm, memoryLimitKB)
	}
	// A share of the CPU, not a time: the old code spent 52 to 54% of it
	// collecting (18 to 21 CPU-seconds in all, against 3 to 5 now).
	if gc := runtimeOf(t, m).GCShare; gc > 0.25 {
		t.Errorf("the collector took %.0f%% of the daemon's CPU saving small files (bound 25%%)", 100*gc)
	}
	m.restart()
	for _, k := range []int{0, files / 2, files - 1} {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("__%d_0.distcp", k)))
		if err != nil || !bytes.Equal(got, body(k)) {
			t.Fatalf("__%d_0.distcp after a remount: %q, %v", k, got, err)
		}
	}
}

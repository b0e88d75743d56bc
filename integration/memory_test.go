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
)

// memoryLimitKB is the bound issues 5 and 6 set on peak RSS.
const memoryLimitKB = 300 << 10

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
	h := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(h)+1))
	w.WriteString(h + "\n")
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

// TestDaemonMemoryBounded: the daemon's memory is bounded by its settings,
// whatever the file size: with 128 MiB for plain chunks, 64 MiB of
// write-back and a heap limit of 256 MiB, its peak RSS while a checkpoint of
// 1 GiB (4 GiB with CKPTFS_FULL) is written into the mount and read back
// stays under 300 MB. (The defaults follow the machine's RAM, and leave
// the collector room: docs/ARCHITECTURE.md, Memory.)
func TestDaemonMemoryBounded(t *testing.T) {
	m := newMount(t, "--cache-mib", "128", "--memory-limit", "256MiB")
	src := bigCheckpoint(t, t.TempDir(), bigSize())
	if out, err := exec.Command("cp", src, m.path("ckpt-1.npy")).CombinedOutput(); err != nil {
		t.Fatalf("cp in: %v %s", err, out)
	}
	if !sameContent(t, src, m.path("ckpt-1.npy")) {
		t.Fatal("read back differs")
	}
	hwm := vmHWM(t, pidOfMount(t, m.dir))
	t.Logf("daemon peak RSS after writing and reading %d MiB: %d MiB", bigSize()>>20, hwm>>10)
	if hwm > memoryLimitKB {
		t.Fatalf("daemon peak RSS %d KiB, bound %d KiB", hwm, memoryLimitKB)
	}
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

// TestDaemonMemoryManyWriters (issue 27): 24 files of 100 MB rewritten in
// place at once (opened without O_TRUNC, written over in blocks out of
// order, closed) keep the daemon's peak RSS under 300 MB: the saves wait in
// the page cache, in their staging files, not in the daemon.
func TestDaemonMemoryManyWriters(t *testing.T) {
	const files, size = 24, 100 << 20
	m := newMount(t, "--cache-mib", "128", "--memory-limit", "256MiB")
	base := make([]byte, size)
	rand.New(rand.NewSource(24)).Read(base)
	content := func(k, round int) []byte {
		b := append([]byte(nil), base...)
		binary.LittleEndian.PutUint64(b, uint64(k<<8|round))
		for off := 4096 * (k + 1); off < size; off += 1 << 20 {
			b[off] ^= byte(round + 1)
		}
		return b
	}
	for k := 0; k < files; k++ {
		if err := os.WriteFile(m.path(fmt.Sprintf("rank-%d.bin", k)), content(k, 0), 0o644); err != nil {
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
			f, err := os.OpenFile(m.path(fmt.Sprintf("rank-%d.bin", k)), os.O_RDWR, 0)
			if err != nil {
				errs <- err
				return
			}
			data := content(k, 1)
			const block = 4 << 20
			for _, b := range rand.New(rand.NewSource(int64(k))).Perm(size / block) {
				if _, err := f.WriteAt(data[b*block:(b+1)*block], int64(b*block)); err != nil {
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
	t.Logf("daemon peak RSS with %d files of %d MiB rewritten in place at once: %d MiB", files, size>>20, hwm>>10)
	if hwm > memoryLimitKB {
		t.Fatalf("daemon peak RSS %d KiB, bound %d KiB", hwm, memoryLimitKB)
	}
	for _, k := range []int{0, files - 1} {
		got, err := os.ReadFile(m.path(fmt.Sprintf("rank-%d.bin", k)))
		if err != nil || !bytes.Equal(got, content(k, 1)) {
			t.Fatalf("rank-%d.bin after the rewrite: %v", k, err)
		}
	}
}

package nandsim

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPageMapNoneIsZero(t *testing.T) {
	m := newPageMap(3000)
	for _, i := range []int32{0, 1023, 1024, 2999} {
		if got := m.get(i); got != -1 {
			t.Fatalf("fresh map: get(%d) = %d, want -1", i, got)
		}
	}
	m.set(1500, 0)
	m.set(7, 41)
	c := m.clone()
	m.set(7, -1)
	m.set(7, -1)
	if c.get(1500) != 0 || c.get(7) != 41 || c.get(8) != -1 || m.get(7) != -1 {
		t.Fatalf("clone: got %d %d %d, original %d", c.get(1500), c.get(7), c.get(8), m.get(7))
	}
}

func TestPageMapDropsEmptyChunks(t *testing.T) {
	m := newPageMap(10 * mapChunk)
	for i := int32(0); i < 3*mapChunk; i++ {
		m.set(i, i)
	}
	full := m.bytes()
	for i := int32(0); i < 3*mapChunk; i++ {
		m.set(i, -1)
	}
	m.set(5*mapChunk+1, 9)
	if m.mapped != 1 || m.bytes() >= full/2 {
		t.Fatalf("after unmapping: %d mapped, %d bytes (full %d)", m.mapped, m.bytes(), full)
	}
	var seen []int32
	m.each(func(i, v int32) { seen = append(seen, i, v) })
	if len(seen) != 2 || seen[0] != 5*mapChunk+1 || seen[1] != 9 {
		t.Fatalf("each: %v", seen)
	}
}

// A device sized from a terabyte disk must cost memory for the data it
// holds, not for its capacity: dense page maps would hold 2.5 GiB for the
// two maps, and the daemon keeps two devices. Measured in a child process,
// whose heap is fresh (reused heap memory is resident already and would
// hide the cost). What remains is the per-block state (about 25 bytes per
// 256 KiB block).
func TestTerabyteDeviceMemoryFollowsData(t *testing.T) {
	if os.Getenv("NANDSIM_RSS_CHILD") == "1" {
		cfg, err := ConfigForSize(DefaultConfig(), 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		before := residentKiB(t)
		s, err := Open(cfg, Options{StatePath: filepath.Join(t.TempDir(), "state")})
		if err != nil {
			t.Fatal(err)
		}
		const stored = 256 << 20 // bytes written, spread over the device
		step := cfg.LogicalPages() / (stored / int64(cfg.PageSize) / 256)
		for lpn := int64(0); lpn+256 <= cfg.LogicalPages(); lpn += step {
			if err := s.Account(lpn, 256); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		syncTook := time.Since(start)
		grew := residentKiB(t) - before
		dense := (cfg.LogicalPages() + cfg.PhysicalPages()) * 4 / 1024
		maps := (s.f.l2p.bytes() + s.f.p2l.bytes()) / 1024
		t.Logf("1 TiB device, %d MiB stored: maps %d KiB (dense: %d KiB), resident growth %d KiB, state saved in %v",
			stored>>20, maps, dense, grew, syncTook)
		// The chunk tables (10 bytes per 1024 pages), then at most 16 times
		// the 8 bytes per stored page the two maps need at the least.
		tables := (cfg.LogicalPages() + cfg.PhysicalPages()) / mapChunk * 10 / 1024
		if maps > tables+16*stored/int64(cfg.PageSize)*8/1024 {
			t.Errorf("page maps hold %d KiB for %d MiB stored", maps, stored>>20)
		}
		// The per-block state and its copy for the state file: about 45
		// bytes per block. Dense maps alone would be 1.9 GB.
		if grew > 256<<10 {
			t.Errorf("a 1 TiB device holding %d MiB made %d KiB resident", stored>>20, grew)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTerabyteDeviceMemoryFollowsData$", "-test.v")
	cmd.Env = append(os.Environ(), "NANDSIM_RSS_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
}

func residentKiB(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

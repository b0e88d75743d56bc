package nandsim

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
	if c.get(1500) != 0 || c.get(7) != 41 || c.get(8) != -1 || m.get(7) != -1 {
		t.Fatalf("clone: got %d %d %d, original %d", c.get(1500), c.get(7), c.get(8), m.get(7))
	}
}

// A fresh device of the paper's size must not make its page maps (~62 MB)
// resident: the daemon keeps two such devices, and that memory is better
// spent on reference chunks. Measured in a child process, whose heap is
// fresh (reused heap memory is resident already and would hide the cost).
func TestFreshDeviceMapsNotResident(t *testing.T) {
	if os.Getenv("NANDSIM_RSS_CHILD") == "1" {
		before := residentKiB(t)
		s, err := Open(DefaultConfig(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Account(0, 256); err != nil {
			t.Fatal(err)
		}
		grew := residentKiB(t) - before
		maps := int64(len(s.f.l2p)+len(s.f.p2l)) * 4 / 1024
		t.Logf("page maps %d KiB, resident growth %d KiB", maps, grew)
		if grew > maps/4 {
			t.Fatalf("opening a fresh device made %d KiB resident; its page maps are %d KiB", grew, maps)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreshDeviceMapsNotResident$", "-test.v")
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

package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for benchrun as the peakrss wrapper.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "peakrss" {
		if err := servePeakRSS(os.Args[2:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPeakRSSIsTheChilds: a parent holding 512 MiB must not lend that to
// the figure of a child that holds a few MiB (a plain wait4 would say
// ≥ 512 MiB here).
func TestPeakRSSIsTheChilds(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hold := make([]byte, 512<<20)
	for i := range hold {
		hold[i] = byte(i)
	}
	b := &bench{self: self, tmp: t.TempDir(), root: t.TempDir()}
	out, rss, err := b.peakRSS("sh", "-c", "echo hello")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "hello\n" {
		t.Errorf("stdout %q", out)
	}
	if rss <= 0 || rss > 64<<20 {
		t.Errorf("child's peak RSS %d MiB, want a few MiB", rss>>20)
	}
	if _, _, err := b.peakRSS("sh", "-c", "exit 3"); err == nil {
		t.Error("a failing command reported success")
	}
	_ = hold[len(hold)-1]
}

func TestProcKB(t *testing.T) {
	if n := procStatus(os.Getpid(), "VmRSS"); n < 1<<20 {
		t.Errorf("own VmRSS %d bytes", n)
	}
	if n := meminfo("MemTotal"); n < 64<<20 {
		t.Errorf("MemTotal %d bytes", n)
	}
	if n := procKB("/proc/meminfo", "NoSuchField"); n != 0 {
		t.Errorf("missing field read as %d", n)
	}
}

package integration

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A test blocked on a request that a deadlocked daemon read and never
// answers sleeps in the kernel, where no signal reaches it: go test's
// -timeout then cannot end the test binary, and the run hangs with no
// output at all. So, shortly before the timeout, watchHangs makes every
// daemon this run started dump its goroutines and exit (SIGQUIT: the Go
// runtime writes the stacks to its log); the kernel then fails the
// blocked requests, the tests fail, and the stacks say where it hung.

// hangMargin is how long before go test's -timeout the daemons are
// stopped: time for the tests to fail and the binary to exit.
const hangMargin = 2 * time.Minute

// watchHangs arms the watch for the run's -timeout (flags parsed).
func watchHangs() {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout < 3*hangMargin {
		return
	}
	time.AfterFunc(timeout-hangMargin, func() {
		daemons := runningDaemons()
		fmt.Fprintf(os.Stderr, "integration: %v to go test's timeout, %d daemons still running: stopping them with SIGQUIT\n", hangMargin, len(daemons))
		quitDaemons(daemons)
	})
}

// quitDaemons sends SIGQUIT to daemons (pid: store), then prints the end
// of each one's log, where the Go runtime wrote its goroutines' stacks.
func quitDaemons(daemons map[int]string) {
	for pid := range daemons {
		syscall.Kill(pid, syscall.SIGQUIT)
	}
	time.Sleep(5 * time.Second)
	for pid, store := range daemons {
		b, _ := os.ReadFile(filepath.Join(store, "ckptfs.log"))
		const tail = 64 << 10
		fmt.Fprintf(os.Stderr, "integration: daemon %d of store %s, the last %d bytes of its log:\n%s\n", pid, store, tail, b[max(0, len(b)-tail):])
	}
}

// runningDaemons maps the pids of running processes of ckptfsBin to their
// --store.
func runningDaemons() map[int]string {
	daemons := map[int]string{}
	bin, err := filepath.EvalSymlinks(ckptfsBin)
	if err != nil {
		bin = ckptfsBin
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != bin {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		for i, a := range args {
			if string(a) == "--store" && i+1 < len(args) {
				daemons[pid] = string(args[i+1])
			} else if s, ok := bytes.CutPrefix(a, []byte("--store=")); ok {
				daemons[pid] = string(s)
			}
		}
		if _, ok := daemons[pid]; !ok {
			daemons[pid] = "(no --store)"
		}
	}
	return daemons
}

// TestHangWatchQuitsDaemons: the watch finds a running daemon and its
// store, and SIGQUIT leaves the daemon's goroutines in its log and the
// mount failing its requests instead of blocking them.
func TestHangWatchQuitsDaemons(t *testing.T) {
	m := newMount(t)
	pid := pidOfMount(t, m.dir)
	store, err := filepath.EvalSymlinks(m.store)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(runningDaemons()[pid]); got != store {
		t.Fatalf("runningDaemons()[%d] = %q, want the store %s", pid, runningDaemons()[pid], store)
	}
	quitDaemons(map[int]string{pid: m.store})
	defer exec.Command("umount", "-l", m.dir).Run() // before the mount's cleanup
	if _, err := os.Stat(m.path("x")); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("stat in the mount of a stopped daemon: %v, want ENOTCONN", err)
	}
	b, err := os.ReadFile(filepath.Join(m.store, "ckptfs.log"))
	if err != nil || !bytes.Contains(b, []byte("SIGQUIT")) || !bytes.Contains(b, []byte("goroutine ")) {
		t.Errorf("the daemon's log has no goroutine dump (%v):\n%s", err, b[max(0, len(b)-2000):])
	}
}

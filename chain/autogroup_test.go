package chain

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const autogroupChildEnv = "CKPTFS_TEST_AUTOGROUP_CHILD"

// TestSessionGroupLowered: a daemon that leads its own session lowers its
// session's scheduling group to the encode nice; a process that does not
// lead its session (a mount in the foreground) leaves the group, which it
// shares with the user's shell, as it was.
func TestSessionGroupLowered(t *testing.T) {
	if os.Getenv(autogroupChildEnv) != "" {
		if err := lowerSessionGroup(7); err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		b, _ := os.ReadFile(autogroupFile)
		os.Stdout.Write(b)
		os.Exit(0)
	}
	before, err := os.ReadFile(autogroupFile)
	if err != nil {
		t.Skipf("SKIPPED: this kernel has no autogroup (%v): nothing to lower", err)
	}
	if sid, _ := unix.Getsid(0); sid == os.Getpid() {
		t.Log("this test process leads its session: the case of a process that does not is not checked")
	} else {
		if err := lowerSessionGroup(7); err != nil {
			t.Fatalf("not a session leader: %v", err)
		}
		if after, _ := os.ReadFile(autogroupFile); string(after) != string(before) {
			t.Fatalf("a process that does not lead its session changed its group: %q -> %q", before, after)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run", "^TestSessionGroupLowered$")
	cmd.Env = append(os.Environ(), autogroupChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("session leader: %v: %s", err, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(out)), "nice 7") {
		t.Fatalf("a session leader's group after lowering it to 7: %q", out)
	}
	if after, _ := os.ReadFile(autogroupFile); string(after) != string(before) {
		t.Fatalf("the child's session group was this one: %q -> %q", before, after)
	}
}

package fs

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteFailsWhenFull: on a full simulated device, write(2) fails with
// ENOSPC, as on a full plain filesystem, in both save modes: a shell's
// redirection, cp and dd report it (sh -c 'echo data > f' exited 0 and
// left f empty: the shell never checks close, and with passthrough the
// daemon never saw the write). A file that fits is still written.
func TestWriteFailsWhenFull(t *testing.T) {
	for _, daemonWritten := range []bool{false, true} {
		t.Run(map[bool]string{false: "passthrough", true: "daemon-written"}[daemonWritten], func(t *testing.T) {
			m := newTestMountMode(t, nil, daemonWritten)
			fillDevice(t, m)
			src := t.TempDir() + "/src"
			if err := os.WriteFile(src, randomBytes(41, 256<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, cmd := range map[string]string{
				"sh": "echo data > " + m.path("sh.txt") + " && head -c 200000 " + src + " >> " + m.path("sh.txt"),
				"cp": "cp " + src + " " + m.path("cp.bin"),
				"dd": "dd if=" + src + " of=" + m.path("dd.bin") + " bs=64k status=none",
			} {
				// dash reports any failed write of echo as "I/O error".
				out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
				if err == nil || name != "sh" && !strings.Contains(string(out), "No space left on device") {
					t.Errorf("%s on a full device: %v, %q; want it to fail with ENOSPC", name, err, out)
				}
			}
			err := os.WriteFile(m.path("go.bin"), randomBytes(42, 64<<10), 0o644)
			wantErrno(t, "write(2) on a full device", err, syscall.ENOSPC)
			m.fsys.Drain()
			// Space given back is usable again.
			if err := os.Remove(m.path("filler-0")); err != nil {
				t.Fatal(err)
			}
			m.fsys.Drain()
			waitFor(t, "the freed space", func() bool {
				return exec.Command("sh", "-c", "echo data > "+m.path("sh.txt")).Run() == nil
			})
			wantContent(t, m.path("sh.txt"), []byte("data\n"))
		})
	}
}

// waitFor polls cond for up to five seconds: an unlinked inode gives its
// space back when the kernel forgets it, after the unlink's reply.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 5 s", what)
		}
	}
}

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNonRootMountRefusedSaysWhy (issue 21): a non-root mount that
// fusermount3 refuses printed only "fusermount exited with code 256"; the
// reason was in the daemon's log only (and a failed mount removes that log
// with the store it created). Runs the mount as nobody, on a mount point
// nobody cannot write.
func TestNonRootMountRefusedSaysWhy(t *testing.T) {
	needFuse(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a mount as another user")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		requireDeps(t, "fusermount3", err)
	}
	dir, err := os.MkdirTemp("", "ckptfs-nonroot-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ckptfs")
	b, err := os.ReadFile(ckptfsBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "mnt") // root's, 0755: fusermount3 refuses it
	store := filepath.Join(dir, "store")
	for _, d := range []string{mp, store} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(mp, 0o755)
	if err := os.Chown(store, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mount", "--store", store, mp)
	cmd.Env = []string{"HOME=/nonexistent", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		exec.Command(ckptfsBin, "umount", mp).Run()
		t.Fatalf("nobody mounted on root's directory: %s", out)
	}
	msg := string(out)
	i := strings.Index(msg, "fusermount exited with code")
	if i < 0 || !strings.Contains(msg[i:], "fusermount3: ") {
		t.Fatalf("mount refused by fusermount3 does not say why: %v: %s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(msg))
}

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
	dir, bin := nobodyDir(t)
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
	out, err := asNobody(dir, bin, "mount", "--store", store, mp).CombinedOutput()
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

// TestNonRootMount: a user other than root mounts a new store of their own
// (daemon-written saves: no passthrough without CAP_SYS_ADMIN) and saves
// into it like into any directory of theirs. The root of a new store was
// root's, mode 0755, so every create in such a mount failed with EACCES.
// Also checks that a save closed before a SIGKILL of the user's daemon is
// whole after the user remounts.
func TestNonRootMount(t *testing.T) {
	needFuse(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a mount as another user")
	}
	// fusermount3 opens /dev/fuse as the user: where the device is root's
	// only, let others use it while the test runs, as distributions do.
	if fi, err := os.Stat("/dev/fuse"); err == nil && fi.Mode().Perm()&0o006 != 0o006 {
		if err := os.Chmod("/dev/fuse", fi.Mode().Perm()|0o666); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod("/dev/fuse", fi.Mode().Perm()) })
	}
	dir, bin := nobodyDir(t)
	mp, store := filepath.Join(dir, "mnt"), filepath.Join(dir, "store")
	for _, d := range []string{mp, store} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(dir, "model.npy")
	if err := os.WriteFile(src, bigNpyOf(1, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	nobody := func(name string, args ...string) string {
		t.Helper()
		out, err := asNobody(dir, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v as nobody: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	nobody(bin, "mount", "--store", store, mp)
	mounted := true
	t.Cleanup(func() {
		if mounted {
			exec.Command("fusermount3", "-u", "-z", mp).Run()
		}
	})
	if out := nobody("ls", "-nd", mp); !strings.HasPrefix(out, "drwxr-xr-x") || !strings.Contains(out, " 65534 65534 ") {
		t.Fatalf("the root of nobody's new store: %s", out)
	}
	// A Trainer-like save: a directory, a file under a temporary name,
	// renamed over the live one.
	nobody("mkdir", mp+"/checkpoint-1")
	nobody("cp", src, mp+"/checkpoint-1/model.npy.tmp")
	nobody("mv", mp+"/checkpoint-1/model.npy.tmp", mp+"/checkpoint-1/model.npy")
	nobody("cmp", src, mp+"/checkpoint-1/model.npy")
	if out := nobody(bin, "stats", mp); !strings.Contains(out, "daemon-written") {
		t.Fatalf("stats of a non-root mount does not say its save mode is daemon-written:\n%s", out)
	}
	// Killed after the close: whole after the remount.
	syscall.Kill(pidOfDaemon(t, bin, mp), syscall.SIGKILL)
	exec.Command("fusermount3", "-u", "-z", mp).Run()
	nobody(bin, "mount", "--store", store, mp)
	nobody("cmp", src, mp+"/checkpoint-1/model.npy")
	nobody(bin, "umount", mp)
	mounted = false
	nobody(bin, "fsck", "--deep", "--store", store)
}

// nobodyDir makes a directory that user nobody can enter, removed after
// the test, holding a copy of the binary nobody can run (t.TempDir's
// parent is 0700, and so may be the test's binary's).
func nobodyDir(t *testing.T) (dir, bin string) {
	t.Helper()
	if _, err := exec.LookPath("fusermount3"); err != nil {
		requireDeps(t, "fusermount3", err)
	}
	dir, err := os.MkdirTemp("", "ckptfs-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "ckptfs")
	b, err := os.ReadFile(ckptfsBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// asNobody is a command that runs as user nobody, in dir.
func asNobody(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=/nonexistent", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

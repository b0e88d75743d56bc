package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMountExitCodes checks the exit statuses the Python API tells apart:
// each refusal of ckptfs mount carries its own, before anything is mounted.
func TestMountExitCodes(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(what string, want int, args ...string) {
		t.Helper()
		_, err := runCkptfs(t, args...)
		if err == nil || exitCode(err) != want {
			t.Errorf("%s: exit %d (%v), want %d", what, exitCode(err), err, want)
		}
	}
	check("missing mount point", exitMountPoint, "mount", "--store", filepath.Join(dir, "s1"), filepath.Join(dir, "nowhere"))
	check("store inside the mount point", exitStore, "mount", "--store", filepath.Join(mnt, "store"), mnt)
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777) // past the umask
	check("store writable by others", exitStore, "mount", "--store", open, mnt)

	old := fuseDevice
	defer func() { fuseDevice = old }()
	fuseDevice = filepath.Join(dir, "no-fuse")
	check("no /dev/fuse", exitNoFUSE, "mount", "--store", filepath.Join(dir, "s2"), mnt)
	if err := os.WriteFile(fuseDevice, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	check("/dev/fuse a regular file", exitNoFUSE, "mount", "--store", filepath.Join(dir, "s3"), mnt)
	for _, s := range []string{"s1", "s2", "s3"} {
		if _, err := os.Stat(filepath.Join(dir, s)); err == nil {
			t.Errorf("a refused mount created the store %s", s)
		}
	}

	if os.Geteuid() == 0 {
		// Busy: something is mounted there already.
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		defer syscall.Unmount(mnt, syscall.MNT_DETACH)
		fuseDevice = old
		_, err := runCkptfs(t, "mount", "--store", filepath.Join(dir, "s4"), mnt)
		if exitCode(err) != exitMountPoint || !strings.Contains(err.Error(), "busy") {
			t.Errorf("busy mount point: exit %d (%v), want %d", exitCode(err), err, exitMountPoint)
		}
	}
	if exitCode(os.ErrClosed) != exitFailure {
		t.Errorf("plain errors must exit %d", exitFailure)
	}
}

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mountRefused mounts store on a fresh mount point and fails the test unless
// the mount is refused with an error containing want.
func mountRefused(t *testing.T, store, want string) {
	t.Helper()
	mp := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ckptfsBin, "mount", "--store", store, mp).CombinedOutput()
	if err == nil {
		exec.Command(ckptfsBin, "umount", mp).Run()
		t.Fatalf("mount with store %s was accepted: %s", store, out)
	}
	if !strings.Contains(string(out), want) {
		t.Fatalf("mount with store %s: %v: %s; want an error saying %q", store, err, out, want)
	}
}

// TestUntrustedStoreRefused (issue 21 item 6): a store someone else prepared
// is not mounted, and its symlinks are not followed: root mounting a store in
// another user's 0777 directory appended its log to, and grew, files the
// symlinks there pointed at.
func TestUntrustedStoreRefused(t *testing.T) {
	needFuse(t)
	base := t.TempDir()

	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	mountRefused(t, open, "writable by its group or by others")

	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		mountRefused(t, theirs, "not to you")
	}

	// Symlinks to the mounting user's own files, planted in an otherwise
	// acceptable store: nothing is written through them.
	for _, name := range []string{"ckptfs.log", "device.img", "meta.db"} {
		store := filepath.Join(base, "links-"+name)
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(base, "victim-"+name)
		if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(store, name)); err != nil {
			t.Fatal(err)
		}
		mountRefused(t, store, "symbolic link")
		if b, _ := os.ReadFile(victim); !bytes.Equal(b, []byte("keep")) {
			t.Errorf("mounting a store with a %s symlink changed its target: %d bytes %.40q", name, len(b), b)
		}
	}
}

// TestDefaultStoresApart (issue 21 item 4): with the default store, the
// mount points .../m/a%b and .../m/a/b shared one store, each showing the
// other's files, and a 275-byte mount point path failed with "file name
// too long".
func TestDefaultStoresApart(t *testing.T) {
	needFuse(t)
	base := t.TempDir()
	long := filepath.Join(base, strings.Repeat("d", 120), strings.Repeat("e", 120))
	mps := []string{filepath.Join(base, "m", "a%b"), filepath.Join(base, "m", "a", "b"), long}
	for i, mp := range mps {
		if err := os.MkdirAll(mp, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ckptfsBin, "mount", mp)
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(base, "data"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mount %s (%d bytes) with the default store: %v\n%s", mp, len(mp), err, out)
		}
		t.Cleanup(func() { exec.Command(ckptfsBin, "umount", mp).Run() })
		if err := os.WriteFile(filepath.Join(mp, "own"), []byte(mp), 0o644); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if b, err := os.ReadFile(filepath.Join(mps[0], "own")); err != nil || string(b) != mps[0] {
				t.Errorf("%s shows %q (%v) after %s was mounted", mps[0], b, err, mp)
			}
		}
	}
}

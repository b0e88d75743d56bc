package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mount(8) runs /sbin/mount.fuse.ckptfs for -t fuse.ckptfs; it looks for
// helpers in /sbin, /sbin/fs.d and /sbin/fs only.
const helperPath = "/sbin/mount.fuse.ckptfs"

// installHelper installs the binary under test with make install into a
// temporary DESTDIR, checks the helper link it makes, and points
// /sbin/mount.fuse.ckptfs at that copy until the test ends (what was
// there before is put back).
func installHelper(t *testing.T) {
	t.Helper()
	needFuse(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount(8)'s helpers are in /sbin")
	}
	for _, prog := range []string{"mount", "umount", "make"} {
		if _, err := exec.LookPath(prog); err != nil {
			requireDeps(t, prog, err)
		}
	}
	dest := t.TempDir()
	out, err := exec.Command("make", "-s", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+ckptfsBin, "VERSION=test").CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	if target, err := os.Readlink(filepath.Join(dest, "sbin", "mount.fuse.ckptfs")); err != nil || target != "/usr/bin/ckptfs" {
		t.Fatalf("make install's helper link: %q (%v), want -> /usr/bin/ckptfs", target, err)
	}
	installed := filepath.Join(dest, "usr", "bin", "ckptfs")

	old, err := os.Readlink(helperPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = ""
	case err != nil:
		t.Fatalf("%s exists and is not a symlink (%v): leaving it alone", helperPath, err)
	}
	tmp := helperPath + ".test"
	os.Remove(tmp)
	if err := os.Symlink(installed, tmp); err != nil {
		t.Fatalf("/sbin is not writable, and mount(8) finds its helpers there only: %v", err)
	}
	if err := os.Rename(tmp, helperPath); err != nil {
		os.Remove(tmp)
		t.Fatalf("/sbin is not writable, and mount(8) finds its helpers there only: %v", err)
	}
	t.Cleanup(func() {
		if old == "" {
			os.Remove(helperPath)
			return
		}
		os.Remove(tmp)
		if err := os.Symlink(old, tmp); err == nil {
			os.Rename(tmp, helperPath)
		}
	})
}

// procMount is a line of /proc/mounts.
type procMount struct {
	source, fstype string
	options        []string
}

// procMountAt returns the topmost mount at dir from /proc/mounts.
func procMountAt(t *testing.T, dir string) (procMount, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var m procMount
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == dir {
			m, found = procMount{source: f[0], fstype: f[2], options: strings.Split(f[3], ",")}, true
		}
	}
	return m, found
}

// unmountAtEnd unmounts dir when the test ends, if it is mounted then,
// and waits for its daemon to save the store.
func unmountAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		if isMounted(dir) {
			if out, err := exec.Command(ckptfsBin, "umount", dir).CombinedOutput(); err != nil {
				t.Errorf("ckptfs umount: %v\n%s", err, out)
				exec.Command(ckptfsBin, "umount", "--lazy", dir).Run()
			}
		}
	})
}

// storeHeld reports whether a process holds the store's metadata open.
func storeHeld(t *testing.T, store string) bool {
	f, err := os.Open(filepath.Join(store, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// TestMountHelperFstab: an fstab line of type fuse.ckptfs mounts through
// mount(8)'s helper, with its source and options in /proc/mounts; umount(8)
// returns while the daemon still saves, and a mount of the same store right
// after waits for it instead of being refused; a store whose daemon still
// serves a mount is refused at once.
func TestMountHelperFstab(t *testing.T) {
	installHelper(t)
	base := t.TempDir()
	mnt, store := filepath.Join(base, "mnt"), filepath.Join(base, "store")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fstab := filepath.Join(base, "fstab")
	line := "ckptfs-test " + mnt + " fuse.ckptfs store=" + store + ",allow_other,noatime,nodev,cache_mib=128,nofail,_netdev,x-test.opt=1 0 0\n"
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, mnt)
	out, err := exec.Command("mount", "--fstab", fstab, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount --fstab %s %s: %v\n%s", fstab, mnt, err, out)
	}
	if len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("the helper said %q on success (mount(8)'s helpers are quiet)", out)
	}
	m, ok := procMountAt(t, mnt)
	if !ok {
		t.Fatalf("mount(8) succeeded, but nothing is mounted at %s", mnt)
	}
	if m.source != "ckptfs-test" || m.fstype != "fuse.ckptfs" {
		t.Errorf("/proc/mounts: source %q type %q, want ckptfs-test fuse.ckptfs", m.source, m.fstype)
	}
	for _, o := range []string{"rw", "noatime", "nodev", "allow_other"} {
		if !slices.Contains(m.options, o) {
			t.Errorf("/proc/mounts options %v lack %s", m.options, o)
		}
	}
	// As with mount.fuse3: root's mount through mount(8) is suid unless
	// the line says nosuid.
	if slices.Contains(m.options, "nosuid") {
		t.Errorf("/proc/mounts options %v: nosuid, which the line does not ask for", m.options)
	}

	small := []byte("written through the fstab mount\n")
	if err := os.WriteFile(filepath.Join(mnt, "small.txt"), small, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "small.txt")); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("read back %q (%v), want %q", got, err, small)
	}
	// A save whose encoding the unmount waits for: the daemon outlives
	// umount(8) by the time it takes.
	big := bigNpyOf(7, 8<<20)
	if err := os.WriteFile(filepath.Join(mnt, "big.npy"), big, 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", mnt, err, out)
	}
	held := storeHeld(t, store)
	start := time.Now()
	out, err = exec.Command(ckptfsBin, "mount", "--store", store, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("ckptfs mount right after umount(8): %v\n%s", err, out)
	}
	waited := strings.Count(string(out), "waiting for the previous daemon of "+store+" to finish saving")
	switch {
	case held && waited != 1:
		t.Errorf("the previous daemon still held the store, and the mount said %d times that it waited:\n%s", waited, out)
	case !held:
		t.Logf("the previous daemon had let go of the store before the mount (%s)", strings.TrimSpace(string(out)))
	default:
		t.Logf("waited %v for the previous daemon", time.Since(start).Round(time.Millisecond))
	}
	// ckptfs mount's source is the store directory.
	if m, ok := procMountAt(t, mnt); !ok || m.source != store || !slices.Contains(m.options, "nodev") || !slices.Contains(m.options, "nosuid") {
		t.Errorf("ckptfs mount: /proc/mounts %+v (mounted %v), want source %s, nosuid,nodev", m, ok, store)
	}
	for name, want := range map[string][]byte{"small.txt": small, "big.npy": big} {
		if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the remount: %d bytes (%v), want %d", name, len(got), err, len(want))
		}
	}

	// A store whose daemon serves a mount: refused at once.
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	cmd := exec.Command(ckptfsBin, "mount", "--store", store, other)
	out, err = cmd.CombinedOutput()
	if err == nil {
		exec.Command(ckptfsBin, "umount", other).Run()
		t.Fatal("a second daemon mounted a store in use")
	}
	if code := cmd.ProcessState.ExitCode(); code != 5 || !strings.Contains(string(out), "in use by another ckptfs daemon") ||
		strings.Contains(string(out), "waiting") || time.Since(start) > 10*time.Second {
		t.Errorf("store in use by a live mount: exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), out)
	}
}

// TestMountHelperOptions: mount -t fuse.ckptfs runs the helper with
// mount(8)'s options: ro, dev and suid (root's default through mount(8),
// as mount.fuse3's) reach the mount, ckptfs's own flags are taken, -f
// mounts nothing, and an unknown option is refused with nothing mounted.
func TestMountHelperOptions(t *testing.T) {
	installHelper(t)
	base := t.TempDir()
	mnt, store := filepath.Join(base, "mnt"), filepath.Join(base, "store")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	unmountAtEnd(t, mnt)
	opts := "store=" + store + ",device_size=64MiB"

	out, err := exec.Command("mount", "-t", "fuse.ckptfs", "-o", opts+",bogus", "src", mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown mount option "bogus"`) || isMounted(mnt) {
		t.Fatalf("unknown option: %v (mounted %v)\n%s", err, isMounted(mnt), out)
	}
	out, err = exec.Command("mount", "-f", "-t", "fuse.ckptfs", "-o", opts, "src", mnt).CombinedOutput()
	if err != nil || isMounted(mnt) {
		t.Fatalf("mount -f: %v (mounted %v)\n%s", err, isMounted(mnt), out)
	}

	// A store to mount read-only, with a file in it.
	out, err = exec.Command("mount", "-t", "fuse.ckptfs", "-o", opts+",passthrough=false,noexec", "src-rw", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount -t fuse.ckptfs: %v\n%s", err, out)
	}
	m, _ := procMountAt(t, mnt)
	if m.source != "src-rw" || !slices.Contains(m.options, "noexec") || slices.Contains(m.options, "nodev") || slices.Contains(m.options, "nosuid") {
		t.Errorf("/proc/mounts: %+v, want source src-rw, noexec, dev and suid", m)
	}
	data := []byte("kept\n")
	if err := os.WriteFile(filepath.Join(mnt, "f.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// mount -o remount,ro and back (fstests' _scratch_remount): the kernel
	// changes the flags; the daemon serves on.
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,ro: %v\n%s", err, out)
	}
	if m, _ := procMountAt(t, mnt); !slices.Contains(m.options, "ro") || !slices.Contains(m.options, "noexec") {
		t.Errorf("after remount,ro: %+v, want ro and noexec kept", m)
	}
	if err := os.WriteFile(filepath.Join(mnt, "g.txt"), data, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write after remount,ro: %v, want EROFS", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f.txt")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read after remount,ro: %q (%v)", got, err)
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,rw: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(mnt, "g.txt"), data, 0o644); err != nil {
		t.Errorf("write after remount,rw: %v", err)
	}
	if out, err := exec.Command(ckptfsBin, "umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("ckptfs umount: %v\n%s", err, out)
	}

	out, err = exec.Command("mount", "-t", "fuse.ckptfs", "-o", "ro,"+opts, "src-ro", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount -o ro: %v\n%s", err, out)
	}
	m, _ = procMountAt(t, mnt)
	if m.source != "src-ro" || !slices.Contains(m.options, "ro") {
		t.Errorf("/proc/mounts: %+v, want source src-ro, ro", m)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f.txt")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read on the ro mount: %q (%v)", got, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "g.txt"), data, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write on the ro mount: %v, want EROFS", err)
	}
}

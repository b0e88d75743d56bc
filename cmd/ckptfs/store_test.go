package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

// runCkptfs runs the root command with args and returns its output.
func runCkptfs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// newSmallStore creates an empty store on a 64 MiB device and closes it.
func newSmallStore(t *testing.T, dir string) {
	t.Helper()
	dev, err := deviceForSize("64MiB")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := storedir.Open(dir, storedir.Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{Device: dev, NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
}

// noStoreFiles fails if dir holds any file a store consists of.
func noStoreFiles(t *testing.T, dir string) {
	t.Helper()
	for _, name := range medium.Files {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was created in %s", name, dir)
		}
	}
}

func TestReadersRefuseNonStore(t *testing.T) {
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "checkpoints")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "model.pt"), []byte("not a store"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "typo")
	for _, c := range []struct {
		dir, want string
	}{{plain, "is not a ckptfs store"}, {missing, "does not exist"}} {
		for _, args := range [][]string{
			{"stats", "--store", c.dir},
			{"fsck", "--store", c.dir},
			{"report", "--store", c.dir, "--out", filepath.Join(tmp, "page")},
		} {
			out, err := runCkptfs(t, args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: error %v, want one saying %q\n%s", args, err, c.want, out)
			}
			noStoreFiles(t, c.dir)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was created", missing)
	}
}

func TestFsckJSONProblemsEmptyList(t *testing.T) {
	dir := t.TempDir()
	newSmallStore(t, dir)
	out, err := runCkptfs(t, "fsck", "--store", dir, "--json")
	if err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"problems": []`) {
		t.Errorf("fsck --json of a clean store lacks \"problems\": []:\n%s", out)
	}
}

func TestUmountNotMounted(t *testing.T) {
	dir := t.TempDir()
	_, err := runCkptfs(t, "umount", dir)
	if err == nil || err.Error() != dir+" is not mounted" {
		t.Fatalf("umount of a plain directory: %v; want %q", err, dir+" is not mounted")
	}
}

// fakeDaemon makes mount start /bin/false instead of a daemon (this test
// binary would run the tests again).
func fakeDaemon(t *testing.T) {
	t.Helper()
	old := daemonExecutable
	daemonExecutable = func() (string, error) { return "/bin/false", nil }
	t.Cleanup(func() { daemonExecutable = old })
}

func needFuse(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

func TestFailedMountLeavesNoStore(t *testing.T) {
	needFuse(t)
	fakeDaemon(t)
	tmp := t.TempDir()
	mp := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	// A bad flag is refused before anything is created.
	store := filepath.Join(tmp, "new", "store")
	if _, err := runCkptfs(t, "mount", "--store", store, "--device-size", "1MiB", mp); err == nil || !strings.Contains(err.Error(), "--device-size") {
		t.Errorf("mount --device-size 1MiB: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "new")); err == nil {
		t.Errorf("a mount refused for its flags left %s behind", filepath.Join(tmp, "new"))
	}
	// A daemon that dies before mounting: the new directories go again.
	if _, err := runCkptfs(t, "mount", "--store", store, mp); err == nil {
		t.Fatal("mount succeeded with a daemon that exits at once")
	}
	if _, err := os.Stat(filepath.Join(tmp, "new")); err == nil {
		t.Errorf("a failed mount left %s behind", filepath.Join(tmp, "new"))
	}
	// In a directory that existed but held no store, its files go again
	// and the directory stays.
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := runCkptfs(t, "mount", "--store", empty, mp); err == nil {
		t.Fatal("mount succeeded with a daemon that exits at once")
	}
	noStoreFiles(t, empty)
	if _, err := os.Stat(empty); err != nil {
		t.Errorf("the failed mount removed the directory it was given: %v", err)
	}
	// An existing store is never removed.
	old := filepath.Join(tmp, "old")
	newSmallStore(t, old)
	if _, err := runCkptfs(t, "mount", "--store", old, mp); err == nil {
		t.Fatal("mount succeeded with a daemon that exits at once")
	}
	if _, err := os.Stat(filepath.Join(old, medium.MetaFile)); err != nil {
		t.Errorf("a failed mount of an existing store removed its metadata: %v", err)
	}
}

func TestRefusedMountLeavesLogAlone(t *testing.T) {
	needFuse(t)
	fakeDaemon(t)
	tmp := t.TempDir()
	mp := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "store")
	newSmallStore(t, store)
	ds, err := storedir.Open(store, storedir.Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	_, err = runCkptfs(t, "mount", "--store", store, mp)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second mount of a held store: %v; want in use", err)
	}
	if _, err := os.Stat(filepath.Join(store, medium.LogFile)); err == nil {
		t.Error("the refused mount opened the log of the daemon that holds the store")
	}

	// The daemon side (the race the check above does not close): the
	// refusal goes to the starter only, with no repeated prefix, and main
	// does not print it into the log that is its stderr.
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	fd, err := syscall.Dup(int(wr.Fd())) // the daemon closes it
	if err != nil {
		t.Fatal(err)
	}
	wr.Close()
	_, err = runCkptfs(t, "mount", "--foreground", "--ready-fd", strconv.Itoa(fd), "--store", store, mp)
	var reported errReported
	if !errors.As(err, &reported) {
		t.Errorf("daemon refused for a held store returned %v; want an error already reported", err)
	}
	msg := make([]byte, 512)
	n, _ := rd.Read(msg)
	if got := strings.TrimSpace(string(msg[:n])); !strings.HasPrefix(got, "store ") || !strings.Contains(got, "in use") {
		t.Errorf("ready pipe says %q", got)
	}
}

func TestReplayNoBarWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, bytes.Repeat([]byte("not a checkpoint\n"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bar used to go to os.Stderr whatever it was: point it at a file.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = stderr
	out, err := runCkptfs(t, "replay", "--device-size", "64MiB", "--work-dir", dir, file)
	os.Stderr = old
	stderr.Close()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(stderr.Name()); len(b) > 0 {
		t.Errorf("replay drew on a stderr that is not a terminal: %q", b)
	}
	if !strings.Contains(out, "no tensors found in "+file+": it is stored as raw bytes") {
		t.Errorf("replay of a text file does not say it found no tensors:\n%s", out)
	}
}

func TestAnalyzeNoTensors(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := runCkptfs(t, "analyze", a, b)
	if err == nil || !strings.Contains(err.Error(), "no tensors found in "+a) {
		t.Fatalf("analyze of text files: %v; want no tensors found in %s", err, a)
	}
}

// TestOpenDirDoesNotFollowSymlinks (issue 21 item 6): the store's files are
// opened with O_NOFOLLOW, so a symlink planted in a store (after mount's
// checks, or in a store that stats and fsck read) is not followed to create
// or write a file elsewhere.
func TestOpenDirDoesNotFollowSymlinks(t *testing.T) {
	for _, name := range []string{medium.MetaFile, medium.DeviceFile} {
		tmp := t.TempDir()
		store := filepath.Join(tmp, "store")
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(tmp, "elsewhere")
		if err := os.Symlink(target, filepath.Join(store, name)); err != nil {
			t.Fatal(err)
		}
		dev, _ := deviceForSize("64MiB")
		ds, err := storedir.Open(store, storedir.Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{Device: dev, NoSync: true}})
		if err == nil {
			ds.Close()
			t.Errorf("a store whose %s is a symlink was opened", name)
		} else if !errors.Is(err, syscall.ELOOP) {
			t.Errorf("%s symlink: %v; want ELOOP", name, err)
		}
		if _, err := os.Lstat(target); err == nil {
			t.Errorf("opening the store created %s through its %s symlink", target, name)
		}
	}
}

// TestUmountRefusesOtherMounts (issue 21): ckptfs umount unmounted any
// mount, a tmpfs too.
func TestUmountRefusesOtherMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, link} {
		_, err := runCkptfs(t, "umount", p)
		if err == nil || !strings.Contains(err.Error(), "not a ckptfs mount (it is tmpfs)") {
			t.Errorf("ckptfs umount %s of a tmpfs: %v", p, err)
		}
		if !mounted(dir) {
			t.Fatalf("ckptfs umount %s unmounted a tmpfs", p)
		}
	}
}

// TestMountRefusesStoreInsideMountpoint (issue 21): with the store inside
// its own mount point, the periodic state save wrote into the user's files
// or failed.
func TestMountRefusesStoreInsideMountpoint(t *testing.T) {
	needFuse(t)
	fakeDaemon(t)
	tmp := t.TempDir()
	mp := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(mp, link); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{filepath.Join(mp, "store"), filepath.Join(link, "a", "store"), mp} {
		_, err := runCkptfs(t, "mount", "--store", store, mp)
		if err == nil || !strings.Contains(err.Error(), "inside the mount point") {
			t.Errorf("mount --store %s %s: %v", store, mp, err)
		}
	}
	if ents, _ := os.ReadDir(mp); len(ents) != 0 {
		t.Errorf("the refused mounts left %d entries in the mount point", len(ents))
	}
	// A sibling whose name starts with the mount point's is outside it.
	if err := checkStoreOutside(mp+"-store", mp); err != nil {
		t.Error(err)
	}
	if err := checkStoreOutside(filepath.Join(mp, "..data"), mp); err == nil {
		t.Error("a store in the mount point's ..data was accepted")
	}
}

// TestMountSaysWhyFusermountRefused (issue 21): a non-root mount that
// fusermount3 refused printed only "fusermount exited with code 256"; the
// reason was in the daemon's log only.
func TestMountSaysWhyFusermountRefused(t *testing.T) {
	needFuse(t)
	tmp := t.TempDir()
	daemon := filepath.Join(tmp, "daemon")
	script := `#!/bin/sh
echo "/usr/bin/fusermount3: failed to open /dev/fuse: Permission denied" >&2
echo 'mount /x: fusermount exited with code 256' >&3
exit 1
`
	if err := os.WriteFile(daemon, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	old := daemonExecutable
	daemonExecutable = func() (string, error) { return daemon, nil }
	t.Cleanup(func() { daemonExecutable = old })
	mp := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	// An earlier daemon's lines in the log are not this mount's reason.
	if err := os.WriteFile(filepath.Join(store, medium.LogFile), []byte("fusermount3: an old complaint\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runCkptfs(t, "mount", "--store", store, mp)
	want := "mount /x: fusermount exited with code 256: /usr/bin/fusermount3: failed to open /dev/fuse: Permission denied"
	if err == nil || err.Error() != want {
		t.Fatalf("mount refused by fusermount3: %v; want %q", err, want)
	}
}

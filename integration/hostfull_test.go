package integration

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHostFilesystemFull fills the host filesystem under the store (a
// 96 MiB tmpfs) with two 40 MiB saves closed together: their staging files
// leave no room for the simulated device's image to take their commits. A
// plain filesystem keeps both files, and so must the mount: they read back
// whole while they wait for room, after a writer changed one of them, after
// a SIGKILL of the daemon (the mount that follows must not fail for the
// full disk) and an unmount, and after deleting one made room for the
// other's commit.
func TestHostFilesystemFull(t *testing.T) { inEachSaveMode(t, hostFilesystemFull) }

func hostFilesystemFull(t *testing.T, flags ...string) {
	needFuse(t)
	base := t.TempDir()
	disk := filepath.Join(base, "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", disk).CombinedOutput(); err != nil {
		requireDeps(t, "a 96 MiB tmpfs for the store (mount(8) as root)", fmt.Errorf("%v: %s", err, out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", disk).Run() })
	m := &mount{t: t, dir: filepath.Join(base, "mnt"), store: filepath.Join(disk, "store"),
		args: append([]string{"--device-size", "256MiB"}, flags...)}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(m.stop)

	rng := rand.New(rand.NewSource(96))
	want := map[string][]byte{}
	var files []*os.File
	for _, name := range []string{"a.bin", "b.bin"} {
		data := make([]byte, 40<<20)
		rng.Read(data) // incompressible: its commit needs as much room again
		f, err := os.Create(m.path(name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		want[name] = data
	}
	for i, name := range []string{"a.bin", "b.bin"} {
		if _, err := files[i].Write(want[name]); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatalf("close %s: %v", f.Name(), err)
		}
	}
	waiting := func() int {
		g, _ := filepath.Glob(filepath.Join(m.store, "staging", "*.closed"))
		return len(g)
	}
	same := func(when string) {
		t.Helper()
		for name, data := range want {
			if b, err := os.ReadFile(m.path(name)); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("%s %s: %d bytes, %v; want its save of %d bytes", when, name, len(b), err, len(data))
			}
		}
	}
	time.Sleep(3 * time.Second) // the commits try, and find no room
	if n := waiting(); n != 2 {
		t.Fatalf("%d saves wait in staging for room on the full host, want 2", n)
	}
	if n := m.stats().WaitingForRoom; n != 2 {
		t.Errorf("stats: %d saves waiting for room, want 2", n)
	}
	same("waiting for room:")

	// fsync tries the commit at once, and says there is no room.
	f, err := os.Open(m.path("a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fsync of a save waiting for room: %v, want ENOSPC", err)
	}
	f.Close()

	// A writer takes the staged content over; its close keeps its change.
	f, err = os.OpenFile(m.path("a.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := make([]byte, 1<<20)
	rng.Read(patch)
	if _, err := f.WriteAt(patch, 5<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after changing a save waiting for room: %v", err)
	}
	copy(want["a.bin"][5<<20:], patch)
	time.Sleep(2 * time.Second)
	same("changed while waiting for room:")

	m.kill9()
	m.start() // must not fail for want of room
	same("after a SIGKILL, the host still full:")
	if n := waiting(); n != 2 {
		t.Fatalf("after the remount %d saves wait in staging, want 2", n)
	}
	// An unmount does not wait for room: the saves stay staged for the
	// next mount.
	m.stop()
	m.start()
	same("after an unmount and a mount, the host still full:")
	if n := waiting(); n != 2 {
		t.Fatalf("after the unmount %d saves wait in staging, want 2", n)
	}

	if err := os.Remove(m.path("b.bin")); err != nil {
		t.Fatal(err)
	}
	delete(want, "b.bin")
	for try := 0; waiting() > 0; try++ {
		if try == 300 {
			t.Fatalf("a.bin not committed 30 s after room was made (%d staging files wait)", waiting())
		}
		time.Sleep(100 * time.Millisecond)
	}
	same("committed once there was room:")
	m.stop()
	fsck(t, m.store)
	m.start()
	same("after a remount:")
}

package fs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/encode"
	"golang.org/x/sys/unix"
)

// cutFloats is data with the low 16 bits of each float32 after the npy
// header zeroed: what the bf16 view reads.
func cutFloats(data []byte) []byte {
	out := bytes.Clone(data)
	for i := 128; i+4 <= len(out); i += 4 {
		out[i], out[i+1] = 0, 0
	}
	return out
}

// TestViewTree: .ckptfs/view/bf16 mirrors the mount's directories and
// regular files, read-only; each file reads (read and mmap) as its
// committed content with its float32 values cut to bfloat16; a file saved
// again reads its new content; nothing in the view can be changed.
func TestViewTree(t *testing.T) {
	m := mountStore(t, filepath.Join(t.TempDir(), "store"), true)
	if err := os.Mkdir(m.path("run"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(51))
	vals := make([]float32, 400_000)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	var files [][]byte
	for k := 0; k < 4; k++ {
		for i := range vals {
			vals[i] += float32(rng.NormFloat64() * 1e-3)
		}
		data := ckpttest.NpyFile(vals)
		files = append(files, data)
		writePieces(t, m.path("run", fmt.Sprintf("ckpt-%d.npy", k)), data)
	}
	if err := os.Symlink("run/ckpt-0.npy", m.path("link")); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("notes.txt"), []byte("not a tensor"))
	view := m.path(controlDir, viewDirName, viewBF16Name)
	if names := readNames(t, m.path(controlDir, viewDirName)); strings.Join(names, ",") != "bf16,bf16-nearest,fp16" {
		t.Errorf("view directory lists %v", names)
	}
	// The views rounding to nearest, and that they are other files than
	// bf16's (their own inodes).
	for _, round := range []struct {
		name string
		fn   func([]byte)
	}{{"bf16-nearest", encode.RoundFloat32BF16}, {"fp16", encode.RoundFloat32FP16}} {
		for k, data := range files {
			want := bytes.Clone(data)
			round.fn(want[128:])
			name := m.path(controlDir, viewDirName, round.name, "run", fmt.Sprintf("ckpt-%d.npy", k))
			wantContent(t, name, want)
			mmapReadInChild(t, name, want)
		}
	}
	if names := readNames(t, view); strings.Join(names, ",") != "notes.txt,run" {
		t.Errorf("view lists %v, want notes.txt and run (no symlink)", names)
	}
	wantContent(t, filepath.Join(view, "notes.txt"), []byte("not a tensor"))
	for k, data := range files {
		name := filepath.Join(view, "run", fmt.Sprintf("ckpt-%d.npy", k))
		want := cutFloats(data)
		if bytes.Equal(want, data) {
			t.Fatal("the test data has no low bits to cut")
		}
		wantContent(t, name, want)
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(len(data)) || fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: size %d mode %v, want %d read-only", name, fi.Size(), fi.Mode(), len(data))
		}
		mmapReadInChild(t, name, want)
		wantContent(t, m.path("run", fmt.Sprintf("ckpt-%d.npy", k)), data) // the file itself is exact
	}
	// Saved again: the view follows.
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i)))
	}
	again := ckpttest.NpyFile(vals)
	writePieces(t, m.path("run", "ckpt-0.npy"), again)
	wantContent(t, filepath.Join(view, "run", "ckpt-0.npy"), cutFloats(again))

	f := filepath.Join(view, "run", "ckpt-1.npy")
	_, openErr := os.OpenFile(f, os.O_WRONLY, 0)
	_, createErr := os.Create(filepath.Join(view, "new"))
	for _, c := range []struct {
		what string
		err  error
	}{
		{"open for writing", openErr},
		{"create", createErr},
		{"unlink", syscall.Unlink(f)},
		{"truncate", syscall.Truncate(f, 0)},
		{"chmod", syscall.Chmod(f, 0o644)},
		{"rename", syscall.Rename(f, filepath.Join(view, "run", "x"))},
		{"mkdir", syscall.Mkdir(filepath.Join(view, "d"), 0o755)},
		{"rmdir", syscall.Rmdir(filepath.Join(view, "run"))},
		{"rmdir bf16", syscall.Rmdir(view)},
	} {
		if c.err == nil {
			t.Errorf("%s in the view succeeded, want it refused", c.what)
		}
	}
	wantContent(t, m.path("run", "ckpt-1.npy"), files[1])
	if _, err := os.Stat(filepath.Join(view, "link")); !os.IsNotExist(err) {
		t.Errorf("symlink in the view: %v, want ENOENT", err)
	}
}

// TestViewKeepsPages: a view file read again shows the same version from
// the kernel's pages, without a read reaching the daemon; a new save, a
// tier's re-code and a handle of an older version still reading each make
// the next open drop them.
func TestViewKeepsPages(t *testing.T) {
	m := mountStore(t, filepath.Join(t.TempDir(), "store"), true)
	var reads atomic.Int64
	hook := func() { reads.Add(1) }
	testHookViewRead.Store(&hook)
	defer testHookViewRead.Store(nil)

	rng := rand.New(rand.NewSource(52))
	vals := make([]float32, 300_000)
	version := func() []byte {
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
		}
		data := ckpttest.NpyFile(vals)
		writePieces(t, m.path("ckpt.npy"), data)
		return data
	}
	view := m.path(controlDir, viewDirName, viewBF16Name, "ckpt.npy")
	readView := func(what string, want []byte, fromDaemon bool) {
		t.Helper()
		before := reads.Load()
		wantContent(t, view, cutFloats(want))
		if got := reads.Load() > before; got != fromDaemon {
			t.Errorf("%s: reads reached the daemon: %t, want %t", what, got, fromDaemon)
		}
	}
	v1 := version()
	readView("first read", v1, true)
	readView("second read", v1, false)
	v2 := version()
	readView("after a save", v2, true)
	readView("again", v2, false)

	fi, err := os.Stat(m.path("ckpt.npy"))
	if err != nil {
		t.Fatal(err)
	}
	m.fsys.dropUnusedCopies() // the save's staging file, kept after its commit
	if m.fsys.TierBusy(chain.Ino(fi.Sys().(*syscall.Stat_t).Ino)) {
		t.Fatal("TierBusy with no handle open")
	}
	readView("after the tier's check", v2, true)
	readView("again", v2, false)

	// A handle of v2 open while v3 is saved and opened: its reads after
	// that open fill the pages with v2's bytes again, so the open after
	// both closed drops them.
	old, err := os.Open(view)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	v3 := version()
	newer, err := os.Open(view)
	if err != nil {
		t.Fatal(err)
	}
	newer.Close()
	got := make([]byte, len(v2))
	if _, err := old.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	old.Close()
	// (Whether the pages stay after this depends on when the kernel next
	// sees the file's times, which the two versions' handles report
	// differently: not checked.)
	readView("after a handle of the older version read", v3, true)
}

// TestViewPagesRecord: the record behind FOPEN_KEEP_CACHE for view files
// (in a mount the kernel's own checks of a file's times cover some of
// these cases, so the rules are checked here directly).
func TestViewPagesRecord(t *testing.T) {
	var vp viewPages
	vino, other := viewIno(3, chain.BF16), viewIno(3, chain.FP16)
	closeAll := func() {
		for vp.files[vino].open > 0 {
			vp.closed(vino)
		}
	}
	steps := []struct {
		what string
		do   func() bool
		want bool
	}{
		{"first open", func() bool { return vp.opened(vino, 1) }, false},
		{"second open, same version", func() bool { return vp.opened(vino, 1) }, true},
		{"another view of the file", func() bool { return vp.opened(other, 1) }, false},
		// Version 2 opens while handles of 1 read: it drops the pages,
		// but those handles may fill them again.
		{"a newer version, older handles open", func() bool { return vp.opened(vino, 2) }, false},
		{"the newer version again, older handles open", func() bool { return vp.opened(vino, 2) }, false},
		{"after all closed", func() bool { closeAll(); return vp.opened(vino, 2) }, false},
		{"then again", func() bool { return vp.opened(vino, 2) }, true},
		{"after the content changed under its number", func() bool { closeAll(); vp.changed(3); return vp.opened(vino, 2) }, false},
		{"the other view too", func() bool { vp.closed(other); return vp.opened(other, 1) }, false},
		{"then again", func() bool { return vp.opened(vino, 2) }, true},
		{"a change of another inode", func() bool { vp.changed(4); return vp.opened(vino, 2) }, true},
		{"forgotten while open", func() bool { vp.forget(vino); return vp.opened(vino, 2) }, true},
		{"forgotten", func() bool { closeAll(); vp.forget(vino); return vp.opened(vino, 2) }, false},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: keep %t, want %t", s.what, got, s.want)
		}
	}
}

// TestViewFollowsRenames: a name in the view names what the same name in
// the mount names, a few milliseconds after a rename or an unlink there
// (the kernel kept view entries for a second, and read a directory
// renamed away under a file's name).
// viewEntryLife outlasts the kernel's entries of the view: one or two
// ticks of its clock (viewChild), whatever its HZ.
const viewEntryLife = 25 * time.Millisecond

func TestViewFollowsRenames(t *testing.T) {
	m := mountStore(t, filepath.Join(t.TempDir(), "store"), true)
	view := func(p ...string) string {
		return m.path(append([]string{controlDir, viewDirName, viewBF16Name}, p...)...)
	}
	writePieces(t, m.path("a"), []byte("file a"))
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("d", "x"), []byte("file x"))
	wantContent(t, view("a"), []byte("file a"))
	wantContent(t, view("d", "x"), []byte("file x"))
	if err := unix.Renameat2(unix.AT_FDCWD, m.path("a"), unix.AT_FDCWD, m.path("d"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	time.Sleep(viewEntryLife) // the kernel's entries of the view
	wantContent(t, view("d"), []byte("file a"))
	wantContent(t, view("a", "x"), []byte("file x"))
	if err := os.Rename(m.path("a", "x"), m.path("y")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("a")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(viewEntryLife)
	if _, err := os.Lstat(view("a")); !os.IsNotExist(err) {
		t.Errorf("the view of a removed directory: %v, want ENOENT", err)
	}
	wantContent(t, view("y"), []byte("file x"))
}

package fs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

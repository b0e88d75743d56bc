package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
)

// TestRandomOps runs a seeded random sequence of file operations against
// the mount and a plain directory side by side, and compares the two after
// every step: content of the file touched, errors, and the directory
// listing; the whole tree every 100 steps and across remounts.
func TestRandomOps(t *testing.T) {
	steps := 2000
	if full() {
		steps = 20000
	}
	m := newMount(t)
	plain := t.TempDir()
	rng := rand.New(rand.NewSource(42))
	names := []string{"a", "b", "ckpt-1.pt", "ckpt-2.pt", "d0/x", "d0/ckpt-3.pt", "d1/y", "d1/d2/z"}
	for _, d := range []string{"d0", "d1", "d1/d2"} {
		for _, root := range []string{m.dir, plain} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	pick := func() string { return names[rng.Intn(len(names))] }
	for step := 0; step < steps; step++ {
		name := pick()
		var desc string
		var errM, errP error
		apply := func(f func(root string) error) {
			errM, errP = f(m.dir), f(plain)
		}
		switch op := rng.Intn(100); {
		case op < 20: // rewrite from scratch, in random pieces (the checkpoint case)
			data := randomPayload(rng)
			pieces := piecesOf(rng, len(data))
			desc = fmt.Sprintf("write %s %d bytes", name, len(data))
			apply(func(root string) error { return writePieces(filepath.Join(root, name), data, pieces) })
		case op < 35: // overwrite in place at a random offset
			data := randomPayload(rng)
			off := int64(rng.Intn(200_000))
			desc = fmt.Sprintf("pwrite %s %d@%d", name, len(data), off)
			apply(func(root string) error { return pwrite(filepath.Join(root, name), data, off) })
		case op < 45:
			data := randomPayload(rng)
			desc = fmt.Sprintf("append %s %d", name, len(data))
			apply(func(root string) error { return appendTo(filepath.Join(root, name), data) })
		case op < 55:
			size := int64(rng.Intn(300_000))
			desc = fmt.Sprintf("truncate %s %d", name, size)
			apply(func(root string) error { return os.Truncate(filepath.Join(root, name), size) })
		case op < 65:
			to := pick()
			desc = fmt.Sprintf("rename %s %s", name, to)
			apply(func(root string) error { return os.Rename(filepath.Join(root, name), filepath.Join(root, to)) })
		case op < 72:
			desc = "unlink " + name
			apply(func(root string) error { return os.Remove(filepath.Join(root, name)) })
		case op < 76:
			to := pick()
			desc = fmt.Sprintf("link %s %s", name, to)
			apply(func(root string) error { return os.Link(filepath.Join(root, name), filepath.Join(root, to)) })
		case op < 78 && step > 0:
			desc = "remount"
			m.restart()
		default:
			off, n := int64(rng.Intn(300_000)), rng.Intn(200_000)
			desc = fmt.Sprintf("read %s %d@%d", name, n, off)
			var bm, bp []byte
			bm, errM = readRange(filepath.Join(m.dir, name), off, n)
			bp, errP = readRange(filepath.Join(plain, name), off, n)
			if !bytes.Equal(bm, bp) {
				t.Fatalf("step %d %s: mount read %d bytes, plain %d, contents differ", step, desc, len(bm), len(bp))
			}
		}
		if errno(errM) != errno(errP) {
			t.Fatalf("step %d %s: mount error %v, plain error %v", step, desc, errM, errP)
		}
		t.Logf("step %d: %s -> %v", step, desc, errM)
		_, sm := os.Stat(filepath.Join(m.dir, name))
		_, sp := os.Stat(filepath.Join(plain, name))
		if errno(sm) != errno(sp) {
			t.Fatalf("step %d %s: stat %s: mount %v, plain %v", step, desc, name, sm, sp)
		}
		if sp == nil && !sameContent(t, filepath.Join(m.dir, name), filepath.Join(plain, name)) {
			t.Fatalf("step %d %s: %s differs", step, desc, name)
		}
		if step%100 == 99 || desc == "remount" {
			sameFiles(t, m.dir, plain)
			if t.Failed() {
				t.Fatalf("step %d (%s): trees differ", step, desc)
			}
			compareListings(t, m.dir, plain)
		}
	}
	sameFiles(t, m.dir, plain)
	m.stop()
	fsck(t, m.store)
}

func errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return syscall.Errno(1 << 20) // some other error: must match too
	}
	return 0
}

func randomPayload(rng *rand.Rand) []byte {
	n := rng.Intn(5)
	sizes := []int{0, 1 + rng.Intn(100), 4096, rng.Intn(70_000), rng.Intn(1_500_000)}
	b := make([]byte, sizes[n])
	if rng.Intn(2) == 0 {
		rng.Read(b)
	} else { // float-like, compressible
		for i := range b {
			b[i] = byte(i / 7 % 13)
		}
	}
	return b
}

func piecesOf(rng *rand.Rand, n int) []int {
	var out []int
	for n > 0 {
		p := min(n, 1+rng.Intn(300_000))
		out = append(out, p)
		n -= p
	}
	return out
}

func writePieces(path string, data []byte, pieces []int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for _, p := range pieces {
		if _, err := f.Write(data[:p]); err != nil {
			f.Close()
			return err
		}
		data = data[p:]
	}
	return f.Close()
}

func pwrite(path string, data []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func appendTo(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readRange(path string, off int64, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, off)
	if err == io.EOF {
		err = nil
	}
	return b[:k], err
}

func compareListings(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) []string {
		var out []string
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, fmt.Sprintf("%s %v %d", rel, fi.IsDir(), sizeIfFile(fi)))
			return nil
		})
		sort.Strings(out)
		return out
	}
	la, lb := list(a), list(b)
	if fmt.Sprint(la) != fmt.Sprint(lb) {
		t.Fatalf("listings differ:\nmount %v\nplain %v", la, lb)
	}
}

func sizeIfFile(fi os.FileInfo) int64 {
	if fi.IsDir() {
		return 0
	}
	return fi.Size()
}

package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRandomHandles is TestRandomOps with handles that stay open: a seeded
// random sequence of opens (every access mode, O_TRUNC, O_APPEND), writes,
// reads, truncates, fsyncs and writes through shared mappings on those
// handles, interleaved with renames, unlinks, links and truncates of the names they
// were opened by, run against the mount and a plain directory side by
// side. Every result (bytes, sizes, errors) must match the plain
// directory's: readers opened before a writer see its bytes, two writers
// of one file see each other's, and a file renamed or unlinked while open
// keeps serving its handles, as on any local filesystem. Both save modes.
func TestRandomHandles(t *testing.T) {
	steps := 1500
	if full() {
		steps = 10000
	}
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				m := newMount(t, flags...)
				randomHandles(t, m, t.TempDir(), seed, steps/3)
				m.stop()
				fsck(t, m.store)
			})
		}
	})
}

// handlePair is one open(2) made on both sides.
type handlePair struct {
	name   string
	mount  *os.File
	plain  *os.File
	flags  int
	mapped bool
}

func randomHandles(t *testing.T, m *mount, plain string, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	names := []string{"a.pt", "b.pt", "d/c.pt", "d/e.pt"}
	for _, root := range []string{m.dir, plain} {
		if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var hs []*handlePair
	defer func() {
		for _, h := range hs {
			h.mount.Close()
			h.plain.Close()
		}
	}()
	pick := func() string { return names[rng.Intn(len(names))] }
	openFlags := []int{
		os.O_RDONLY,
		os.O_WRONLY | os.O_CREATE,
		os.O_RDWR | os.O_CREATE,
		os.O_RDWR | os.O_CREATE | os.O_TRUNC,
		os.O_WRONLY | os.O_CREATE | os.O_TRUNC,
		os.O_WRONLY | os.O_CREATE | os.O_APPEND,
	}
	for step := 0; step < steps; step++ {
		var desc string
		var errM, errP error
		var h *handlePair
		if len(hs) > 0 {
			h = hs[rng.Intn(len(hs))]
		}
		op := rng.Intn(100)
		if h == nil && op < 70 {
			op = 70 + rng.Intn(30) // nothing open yet: a path operation
		}
		switch {
		case op < 15: // write at an offset (appends where O_APPEND)
			data := randomPayload(rng)
			if len(data) > 400_000 {
				data = data[:400_000]
			}
			off := int64(rng.Intn(300_000))
			desc = fmt.Sprintf("pwrite %s(%#x) %d@%d", h.name, h.flags, len(data), off)
			var nm, np int
			if h.flags&os.O_APPEND != 0 {
				nm, errM = h.mount.Write(data)
				np, errP = h.plain.Write(data)
			} else {
				nm, errM = h.mount.WriteAt(data, off)
				np, errP = h.plain.WriteAt(data, off)
			}
			if nm != np {
				t.Fatalf("step %d %s: mount wrote %d, plain %d", step, desc, nm, np)
			}
		case op < 30: // read through the handle
			off, n := int64(rng.Intn(400_000)), 1+rng.Intn(300_000)
			desc = fmt.Sprintf("pread %s(%#x) %d@%d", h.name, h.flags, n, off)
			bm, bp := make([]byte, n), make([]byte, n)
			var km, kp int
			km, errM = h.mount.ReadAt(bm, off)
			kp, errP = h.plain.ReadAt(bp, off)
			if km != kp || !bytes.Equal(bm[:km], bp[:kp]) {
				t.Fatalf("step %d %s: mount read %d bytes, plain %d, contents differ at %d", step, desc, km, kp, firstDiff(bm[:km], bp[:kp]))
			}
		case op < 36:
			size := int64(rng.Intn(400_000))
			desc = fmt.Sprintf("ftruncate %s(%#x) %d", h.name, h.flags, size)
			errM, errP = h.mount.Truncate(size), h.plain.Truncate(size)
		case op < 42:
			desc = fmt.Sprintf("fstat %s(%#x)", h.name, h.flags)
			fm, em := h.mount.Stat()
			fp, ep := h.plain.Stat()
			errM, errP = em, ep
			if em == nil && ep == nil && fm.Size() != fp.Size() {
				t.Fatalf("step %d %s: mount size %d, plain %d", step, desc, fm.Size(), fp.Size())
			}
		case op < 46:
			desc = fmt.Sprintf("fsync %s(%#x)", h.name, h.flags)
			errM, errP = h.mount.Sync(), h.plain.Sync()
		case op < 52: // write through a shared mapping of the file's first bytes
			desc = fmt.Sprintf("mmap-write %s(%#x)", h.name, h.flags)
			fi, err := h.plain.Stat()
			if err != nil {
				t.Fatal(err)
			}
			n := int(min(fi.Size(), 200_000))
			if h.flags&(os.O_RDWR) == 0 || h.flags&os.O_APPEND != 0 || n == 0 {
				desc += " (skipped: not O_RDWR or empty)"
				break
			}
			off := rng.Intn(n)
			k := 1 + rng.Intn(n-off)
			data := randomPayload(rng)
			for len(data) < k {
				data = append(data, byte(rng.Intn(256)))
			}
			desc += fmt.Sprintf(" %d@%d of %d", k, off, n)
			errM = mmapWrite(h.mount, n, off, data[:k])
			errP = mmapWrite(h.plain, n, off, data[:k])
			h.mapped = true
		case op < 70:
			desc = fmt.Sprintf("close %s(%#x)", h.name, h.flags)
			errM, errP = h.mount.Close(), h.plain.Close()
			for i := range hs {
				if hs[i] == h {
					hs = append(hs[:i], hs[i+1:]...)
					break
				}
			}
		case op < 82:
			if len(hs) >= 6 {
				desc = "open (skipped: 6 open)"
				break
			}
			name, flags := pick(), openFlags[rng.Intn(len(openFlags))]
			desc = fmt.Sprintf("open %s %#x", name, flags)
			fm, em := os.OpenFile(filepath.Join(m.dir, name), flags, 0o644)
			fp, ep := os.OpenFile(filepath.Join(plain, name), flags, 0o644)
			errM, errP = em, ep
			switch {
			case em == nil && ep == nil:
				hs = append(hs, &handlePair{name: name, mount: fm, plain: fp, flags: flags})
			case em == nil:
				fm.Close()
			case ep == nil:
				fp.Close()
			}
		case op < 88:
			name, to := pick(), pick()
			desc = fmt.Sprintf("rename %s %s", name, to)
			errM = os.Rename(filepath.Join(m.dir, name), filepath.Join(m.dir, to))
			errP = os.Rename(filepath.Join(plain, name), filepath.Join(plain, to))
		case op < 92:
			name := pick()
			desc = "unlink " + name
			errM, errP = os.Remove(filepath.Join(m.dir, name)), os.Remove(filepath.Join(plain, name))
		case op < 94:
			name, size := pick(), int64(rng.Intn(400_000))
			desc = fmt.Sprintf("truncate %s %d", name, size)
			errM, errP = os.Truncate(filepath.Join(m.dir, name), size), os.Truncate(filepath.Join(plain, name), size)
		case op < 96:
			name, to := pick(), pick()
			desc = fmt.Sprintf("link %s %s", name, to)
			errM = os.Link(filepath.Join(m.dir, name), filepath.Join(m.dir, to))
			errP = os.Link(filepath.Join(plain, name), filepath.Join(plain, to))
		default:
			name := pick()
			desc = "write whole " + name
			data := randomPayload(rng)
			errM = os.WriteFile(filepath.Join(m.dir, name), data, 0o644)
			errP = os.WriteFile(filepath.Join(plain, name), data, 0o644)
		}
		if errno(errM) != errno(errP) {
			t.Fatalf("step %d %s: mount error %v, plain error %v", step, desc, errM, errP)
		}
		t.Logf("step %d: %s -> %v (%d open)", step, desc, errM, len(hs))
		for _, name := range names {
			_, sm := os.Stat(filepath.Join(m.dir, name))
			_, sp := os.Stat(filepath.Join(plain, name))
			if errno(sm) != errno(sp) {
				t.Fatalf("step %d %s: stat %s: mount %v, plain %v", step, desc, name, sm, sp)
			}
			if sp == nil && !sameContent(t, filepath.Join(m.dir, name), filepath.Join(plain, name)) {
				t.Fatalf("step %d %s: %s differs", step, desc, name)
			}
		}
	}
	for _, h := range hs {
		if em, ep := h.mount.Close(), h.plain.Close(); errno(em) != errno(ep) {
			t.Fatalf("final close %s: mount %v, plain %v", h.name, em, ep)
		}
	}
	hs = nil
	sameFiles(t, m.dir, plain)
}

// mmapWrite maps the first n bytes of f shared, copies data in at off, and
// unmaps: the kernel writes the pages back like any dirty page.
func mmapWrite(f *os.File, n, off int, data []byte) error {
	mem, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(mem[off:], data)
	return syscall.Munmap(mem)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

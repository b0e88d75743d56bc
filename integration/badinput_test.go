package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputs stores files that are random, truncated, lying about their
// format, empty, sparse, written backwards or in random order, overwritten
// in place, appended to, with very long names and in deep directories; each
// must read back exactly as a plain directory gives it, before and after a
// remount.
func TestBadInputs(t *testing.T) {
	m := newMount(t)
	plain := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	both := func(name string, f func(root string) error) {
		t.Helper()
		for _, root := range []string{m.dir, plain} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := f(root); err != nil {
				t.Fatalf("%s in %s: %v", name, root, err)
			}
		}
	}
	put := func(name string, data []byte) {
		t.Helper()
		both(name, func(root string) error { return os.WriteFile(filepath.Join(root, name), data, 0o644) })
	}

	random := make([]byte, 3<<20+17)
	rng.Read(random)
	put("random.bin", random)
	put("empty.pt", nil)

	// A real torch checkpoint, then truncations of it at awkward places.
	torchFile := realTorchFile(t)
	put("real.pt", torchFile)
	for _, cut := range []int{1, 30, 64, 100, 700, len(torchFile) / 2, len(torchFile) - 22, len(torchFile) - 1} {
		put(fmt.Sprintf("truncated-%d.pt", cut), torchFile[:cut])
	}
	// Files that look like a format and lie in their headers.
	put("lying.npy", append([]byte("\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }      \n"), random[:100_000]...))
	st := []byte(`{"w":{"dtype":"F32","shape":[1000],"data_offsets":[0,999999999]}}`)
	put("lying.safetensors", append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(st))), st...), random[:50_000]...))
	badZip := append([]byte("PK\x03\x04\x14\x00\x08\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\x7f\xff\xff\xff\x7f\x0e\x00\x00\x00archive/data/0"), random[:200_000]...)
	put("lying-zip.pt", badZip)
	put("lying-header.caffemodel", random[:300_000])

	// Sparse: large holes, data at the far end.
	both("sparse.bin", func(root string) error {
		f, err := os.Create(filepath.Join(root, "sparse.bin"))
		if err != nil {
			return err
		}
		f.WriteAt([]byte("start"), 0)
		f.WriteAt([]byte("middle"), 50<<20)
		f.Truncate(100 << 20)
		return f.Close()
	})
	// Written backwards, and in random order.
	data := torchFile
	order := rng.Perm(len(data)/4096 + 1)
	for _, name := range []string{"backwards.pt", "shuffled.pt"} {
		name := name
		both(name, func(root string) error {
			f, err := os.Create(filepath.Join(root, name))
			if err != nil {
				return err
			}
			n := len(data)/4096 + 1
			for i := 0; i < n; i++ {
				blk := n - 1 - i
				if name == "shuffled.pt" {
					blk = order[i]
				}
				lo, hi := blk*4096, min(len(data), (blk+1)*4096)
				if lo < hi {
					if _, err := f.WriteAt(data[lo:hi], int64(lo)); err != nil {
						return err
					}
				}
			}
			return f.Close()
		})
	}
	// Overwrite a committed checkpoint in place, and append to one.
	both("real.pt", func(root string) error { return pwrite(filepath.Join(root, "real.pt"), random[:5000], 12345) })
	both("real.pt", func(root string) error { return appendTo(filepath.Join(root, "real.pt"), random[:70_000]) })
	// Very long names and deep directories.
	long := strings.Repeat("n", 250) + ".pt"
	put(long, torchFile[:1000])
	deep := strings.Repeat("d/", 60) + "leaf.pt"
	put(deep, torchFile)
	if err := os.WriteFile(m.path(strings.Repeat("x", 256)), nil, 0o644); err == nil {
		t.Error("a 256-byte name was accepted (NAME_MAX is 255)")
	}

	sameFiles(t, m.dir, plain)
	m.restart()
	sameFiles(t, m.dir, plain)
	m.stop()
	fsck(t, m.store)
}

// realTorchFile saves a small real checkpoint with torch.save.
func realTorchFile(t *testing.T) []byte {
	t.Helper()
	py := python(t, "torch")
	path := filepath.Join(t.TempDir(), "real.pt")
	script := `import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 10))
o = torch.optim.Adam(m.parameters())
m(torch.randn(4, 64)).sum().backward(); o.step()
torch.save({"model": m.state_dict(), "optimizer": o.state_dict(), "half": torch.randn(100).half()}, sys.argv[1])`
	if out, err := exec.Command(py, "-c", script, path).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("PK")) {
		t.Fatalf("real torch file: %v", err)
	}
	return b
}

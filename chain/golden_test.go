package chain

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// goldenStores are stores written by each on-disk format version, with the
// same content: a torch checkpoint series with deltas, an .npy, a text file
// with a hard link and an xattr, a symlink; from format 4 on, also a sparse
// file (a hole, data, a run of zeros); store-v5 holds the same files,
// copied out of store-v4 through a mount, their chunks of chunk format 3.
// Keep every one, and add one per new format version.
var goldenStores = []string{"store-v1", "store-v2", "store-v3", "store-v4", "store-v5"}

// goldenFiles is the number of regular files (hard links counted once per
// name) in golden store name.
func goldenFiles(name string) int {
	if name >= "store-v4" {
		return 7
	}
	return 6
}

// TestGoldenStores opens a copy of each golden store (upgrading old formats)
// and checks that every file still reads back with the recorded hash and
// that fsck --deep is clean, then does it again after reopening the
// upgraded copy. A change to the on-disk format that breaks old stores
// fails here.
func TestGoldenStores(t *testing.T) {
	for _, name := range goldenStores {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			copyDir(t, filepath.Join("testdata", name), dir)
			for range 2 {
				checkGoldenStore(t, dir, filepath.Join("testdata", name+".manifest"), name >= "store-v3", goldenFiles(name))
			}
		})
	}
}

// checkGoldenStore checks a golden store; with provenance, its versions
// also say how they were made (version records of record version 2,
// format 3 on).
func checkGoldenStore(t *testing.T, dir, manifestPath string, provenance bool, wantFiles int) {
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: policy.Default()}, StoredPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	// The first open reads the device state files as the store was made
	// (page map format 1), the second as this build wrote them at close.
	if !ds.Dev.StateRestored() || !ds.Shadow.StateRestored() {
		t.Errorf("device state not restored: %s; %s", ds.Dev.StateReason(), ds.Shadow.StateReason())
	}
	manifest, err := os.Open(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	defer manifest.Close()
	sc := bufio.NewScanner(manifest)
	files := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case f[0] == "symlink":
			n := lookupPath(t, ds.Store, f[1])
			if n.Mode&syscall.S_IFMT != syscall.S_IFLNK || n.Target != f[3] {
				t.Errorf("symlink %s: %+v", f[1], n)
			}
		case f[0] == "xattr":
			n := lookupPath(t, ds.Store, f[1])
			if v, ok := ds.Names().Xattr(n.Ino, f[2]); !ok || string(v) != f[3] {
				t.Errorf("xattr %s %s = %q", f[1], f[2], v)
			}
		case f[0] == "links":
			if n := lookupPath(t, ds.Store, f[1]); n.Nlink != 2 {
				t.Errorf("%s has %d links, want 2", f[1], n.Nlink)
			}
		default:
			n := lookupPath(t, ds.Store, strings.TrimPrefix(f[1], "./"))
			r, err := ds.OpenVersion(n.Version)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(r, 0, r.Size())); err != nil {
				t.Fatalf("%s: %v", f[1], err)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != f[0] {
				t.Errorf("%s: sha256 %s, want %s", f[1], got, f[0])
			}
			files++
		}
	}
	if files != wantFiles {
		t.Fatalf("manifest listed %d files, want %d", files, wantFiles)
	}
	if wantFiles >= 7 {
		zeros := 0
		for _, c := range chunksOf(t, ds.Store, lookupPath(t, ds.Store, "sparse.bin").Ino) {
			if c.Zeros() {
				zeros++
			}
		}
		if zeros < 2 {
			t.Errorf("sparse.bin has %d chunks of zeros, want its hole and its run of zeros", zeros)
		}
	}
	info, err := ds.Info(lookupPath(t, ds.Store, "run/ckpt-000030.pt").Ino)
	if err != nil || info.Depth == 0 {
		t.Fatalf("the golden series should hold deltas: %+v %v", info, err)
	}
	if provenance && (info.RefReason != meta.RefFamily || info.RefPath != "run/ckpt-000020.pt" || info.Ingest != "stream") {
		t.Errorf("run/ckpt-000030.pt: reference %q (%s), ingest %q; want run/ckpt-000020.pt (family), stream",
			info.RefPath, info.RefReason, info.Ingest)
	}
	mustCheck(t, ds.Store, true)
}

func lookupPath(t *testing.T, s *Store, p string) *meta.Inode {
	t.Helper()
	n := &meta.Inode{Ino: meta.RootIno}
	for _, name := range strings.Split(p, "/") {
		var err error
		if n, err = s.Names().Lookup(n.Ino, name); err != nil {
			t.Fatalf("lookup %s: %v", p, err)
		}
	}
	return n
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

package integration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoldenStoreMounts mounts a copy of the store committed for each
// on-disk format version (chain/testdata/store-v*) and checks its files by
// their recorded hashes through the kernel, as a user would see them.
func TestGoldenStoreMounts(t *testing.T) {
	needFuse(t)
	for _, name := range []string{"store-v1", "store-v2", "store-v3", "store-v4", "store-v5"} {
		t.Run(name, func(t *testing.T) { mountGoldenStore(t, name) })
	}
}

func mountGoldenStore(t *testing.T, name string) {
	base := t.TempDir()
	m := &mount{t: t, dir: filepath.Join(base, "mnt"), store: filepath.Join(base, "store")}
	os.Mkdir(m.dir, 0o755)
	os.Mkdir(m.store, 0o700)
	ents, err := os.ReadDir(filepath.Join("../chain/testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(filepath.Join("../chain/testdata", name), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(m.store, e.Name()), b, 0o600)
	}
	m.start()
	t.Cleanup(m.stop)
	f, err := os.Open(filepath.Join("../chain/testdata", name+".manifest"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	checked := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || !strings.HasPrefix(fields[1], "./") {
			continue
		}
		b, err := os.ReadFile(m.path(fields[1]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != fields[0] {
			t.Errorf("%s differs from the recorded content", fields[1])
		}
		checked++
	}
	if target, err := os.Readlink(m.path("latest.pt")); err != nil || target != "run/ckpt-000030.pt" {
		t.Errorf("symlink: %q %v", target, err)
	}
	want := 6
	if name >= "store-v4" {
		want = 7 // and a sparse file
	}
	if checked != want {
		t.Fatalf("checked %d files, want %d", checked, want)
	}
	m.stop()
	fsck(t, m.store)
}

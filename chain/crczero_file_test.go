package chain

import (
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// TestFileChecksum: the checksum of a sparse file skips its holes and
// equals the CRC-32C of all its bytes; a 16 TiB hole costs no read.
func TestFileChecksum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []struct {
		off int64
		s   string
	}{{0, "head"}, {5 << 20, "middle"}, {(9 << 20) + 3, "tail"}} {
		if _, err := f.WriteAt([]byte(w.s), w.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(12 << 20); err != nil {
		t.Fatal(err)
	}
	all, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size, crc, err := FileChecksum(f)
	want := crc32.Checksum(all, crc32.MakeTable(crc32.Castagnoli))
	if err != nil || size != int64(len(all)) || crc != want {
		t.Fatalf("FileChecksum: %d %08x %v; want %d %08x", size, crc, err, len(all), want)
	}

	// 16 TiB less two pages of hole, then a page: generic/308's file.
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	big := int64(1<<44) - 8192
	if _, err := f.WriteAt(make([]byte, 4096), big); err != nil {
		t.Skipf("the test filesystem takes no 16 TiB file: %v", err)
	}
	size, crc, err = FileChecksum(f)
	if err != nil || size != big+4096 || crc != crc32Zeros(0, big+4096) {
		t.Fatalf("16 TiB sparse file: %d %08x %v; want %d %08x", size, crc, err, big+4096, crc32Zeros(0, big+4096))
	}
}

package medium

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/nandsim"
)

// TestOpenKeepsGeometry: a new store records its device; a reopen keeps
// it whatever is asked, and the files a store directory holds are the ones
// Files names (the staging directory aside).
func TestOpenKeepsGeometry(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(dir, Options{Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if !m.IsNew || m.BackendName != SSD {
		t.Fatalf("new store: IsNew %v, backend %q", m.IsNew, m.BackendName)
	}
	pages := m.Dev.LogicalPages()
	if m.MetaPages < 64 || m.MetaPages >= pages {
		t.Fatalf("metadata region of %d pages on a %d-page device", m.MetaPages, pages)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = Open(dir, Options{NoSync: true}) // the default device is far larger
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.IsNew || m.Dev.LogicalPages() != pages {
		t.Fatalf("reopen: IsNew %v, %d pages, want %d", m.IsNew, m.Dev.LogicalPages(), pages)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{StagingDir: true}
	for _, f := range Files {
		known[f] = true
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("store directory holds %s, which Files does not name", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, DeviceFile)); err != nil {
		t.Errorf("device file: %v", err)
	}
}

// TestDeviceTooSmall: a device with no room past its metadata region is
// refused, and the failed open leaves the store closed (it can be opened
// again).
func TestDeviceTooSmall(t *testing.T) {
	dir := t.TempDir()
	c := nandsim.DefaultConfig()
	c.Channels, c.ChipsPerChannel, c.BlocksPerChip, c.PagesPerBlock = 1, 1, 4, 16
	_, err := Open(dir, Options{Device: c, NoSync: true})
	if err == nil {
		t.Fatal("a 64-page device opened: no room past its 64-page metadata region")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the store", err)
	}
	m, err := Open(t.TempDir(), Options{Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

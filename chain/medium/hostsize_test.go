package medium

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDeviceForFree(t *testing.T) {
	base := StoreDevice()
	row := int64(base.Dies()) * int64(base.PagesPerBlock) * int64(base.PageSize) // one block per die
	for _, tc := range []struct {
		free int64
		note string
	}{
		{1 << 40, ""},
		{100 << 30, ""},
		{10 << 20, "raised"},
		{1 << 50, "capped"},
	} {
		cfg, note, err := deviceForFree(base, tc.free)
		if err != nil {
			t.Fatalf("free %d: %v", tc.free, err)
		}
		if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("free %d: note %q, want %q", tc.free, note, tc.note)
		}
		if cfg.Channels != base.Channels || cfg.PagesPerBlock != base.PagesPerBlock || cfg.PageSize != base.PageSize {
			t.Errorf("free %d: geometry changed: %+v", tc.free, cfg)
		}
		logical := cfg.LogicalPages() * int64(cfg.PageSize)
		if tc.note == "" && (logical > tc.free || logical < tc.free-row) {
			t.Errorf("free %d: device holds %d logical bytes, want the free space within one block row", tc.free, logical)
		}
	}
}

// A new store's device holds what the filesystem under it has free, and
// the store records where the size came from.
func TestNewStoreSizedFromHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet", "made")
	cfg, source, err := HostSizedDevice(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	logical := cfg.LogicalPages() * int64(cfg.PageSize)
	if free > 2*MinHostSizedDevice && (logical > free+free/50 || logical < free-free/50) {
		t.Errorf("device of %d logical bytes on a filesystem with %d free", logical, free)
	}
	if !strings.Contains(source, "free space") {
		t.Errorf("source %q", source)
	}
	m, err := Open(dir, Options{Device: cfg, DeviceSource: source, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.DeviceSource != source || m.Dev.Config() != cfg {
		t.Errorf("opened with source %q, config %+v", m.DeviceSource, m.Dev.Config())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened with other options, the store keeps its device and source.
	m, err = Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.DeviceSource != source || m.Dev.Config() != cfg {
		t.Errorf("reopened: source %q, config %+v", m.DeviceSource, m.Dev.Config())
	}
}

func TestPaperDeviceSource(t *testing.T) {
	m, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.DeviceSource != PaperDeviceSource {
		t.Errorf("default device source %q", m.DeviceSource)
	}
}

package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storedir"
)

// TestStagedWear: the device is charged for a staging file only when the
// host would have written it back (docs/NANDSIM.md, staging files): past
// the dirty expiry, past the background dirty limit; a save encoded and
// deleted sooner costs nothing, and so does one fsynced (fsync commits it
// into the store instead of syncing the staging file).
func TestStagedWear(t *testing.T) {
	const size = 2 << 20
	pages := func(m *testMount) int64 {
		rep, err := m.ds.Report(storedir.ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep.StagedPages
	}
	for _, rule := range []struct {
		name   string
		setup  func(f *FS)
		save   func(t *testing.T, name string)
		charge bool
	}{
		{"closed-and-encoded", func(*FS) {}, func(t *testing.T, name string) { writePieces(t, name, randomBytes(1, size)) }, false},
		{"fsync", func(*FS) {}, func(t *testing.T, name string) {
			f, err := os.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(randomBytes(2, size)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			closeT(t, f)
		}, false},
		{"dirty-expiry", func(f *FS) { f.dirtyExpire = 0 }, func(t *testing.T, name string) { writePieces(t, name, randomBytes(3, size)) }, true},
		{"dirty-limit", func(f *FS) { f.dirtyLimit = 0 }, func(t *testing.T, name string) { writePieces(t, name, randomBytes(4, size)) }, true},
	} {
		t.Run(rule.name, func(t *testing.T) {
			m := mountStore(t, filepath.Join(t.TempDir(), "store"), true)
			rule.setup(m.fsys)
			rule.save(t, m.path("ckpt.bin"))
			m.fsys.Drain()
			got := pages(m)
			want := int64(0)
			if rule.charge {
				want = size / 4096
			}
			if got != want {
				t.Errorf("staged pages charged: %d, want %d", got, want)
			}
		})
	}
}

package wear

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

func newAccounts(t *testing.T) (*Accounts, *meta.DB, *nandsim.SSD, *nandsim.SSD) {
	t.Helper()
	db, err := meta.Open(filepath.Join(t.TempDir(), "meta.db"), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := nandsim.DefaultConfig()
	cfg.Channels, cfg.ChipsPerChannel, cfg.BlocksPerChip = 1, 1, 64
	var devs [2]*nandsim.SSD
	for i := range devs {
		if devs[i], err = nandsim.Open(cfg, nandsim.Options{Backing: nandsim.NoBacking()}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { devs[i].Close() })
	}
	a, err := New(db, devs[0], devs[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return a, db, devs[0], devs[1]
}

// TestShadowFollowsAPlainFilesystem: a rewrite charges the shadow its dirty
// pages and one metadata page, a shrink frees pages, a release frees them
// all; a failed transaction gives back what it reserved.
func TestShadowFollowsAPlainFilesystem(t *testing.T) {
	a, db, _, shadow := newAccounts(t)
	total, free0 := a.ShadowSpace()
	if total == 0 || free0 != total {
		t.Fatalf("fresh shadow: %d of %d pages free", free0, total)
	}
	commit := func(ino meta.Ino, c Change, size int64) {
		t.Helper()
		if err := db.Update(func(tx *meta.Tx) error { return a.Commit(tx, ino, c, size) }); err != nil {
			t.Fatal(err)
		}
	}
	before := shadow.Stats().HostPagesWritten
	commit(1, a.Rewrite(10*4096+1), 10*4096+1)
	if got := shadow.Stats().HostPagesWritten - before; got != 11+1 {
		t.Fatalf("rewrite of 11 pages charged %d shadow pages, want 11 and 1 of metadata", got)
	}
	if _, free := a.ShadowSpace(); free != free0-11 {
		t.Fatalf("after an 11-page file %d pages free, want %d", free, free0-11)
	}
	commit(1, Change{Truncated: true, TruncSize: 4096, Dirty: []PageRange{{0, 1}}}, 4096)
	if _, free := a.ShadowSpace(); free != free0-1 {
		t.Fatalf("after a shrink to 1 page %d pages free, want %d", free, free0-1)
	}
	boom := errors.New("boom")
	err := db.Update(func(tx *meta.Tx) error {
		if err := a.Commit(tx, 2, a.Rewrite(5*4096), 5*4096); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if _, free := a.ShadowSpace(); free != free0-1 {
		t.Fatalf("a failed transaction kept its reservation: %d pages free, want %d", free, free0-1)
	}
	if err := db.Update(func(tx *meta.Tx) error { return a.Release(tx, 1) }); err != nil {
		t.Fatal(err)
	}
	if _, free := a.ShadowSpace(); free != free0 {
		t.Fatalf("after release %d pages free, want %d", free, free0)
	}
	var problems []string
	if err := db.View(func(tx *meta.Tx) error {
		return a.CheckShadow(tx, func(kind, _ string, _ ...any) { problems = append(problems, kind) })
	}); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	// Two commits and a release; the failed transaction's page was
	// charged when its change was made (the estimate is not rolled back).
	if a.ShadowMetadataPages() != 4 {
		t.Errorf("shadow metadata pages %d, want 4", a.ShadowMetadataPages())
	}
}

// TestMetadataRing: metadata pages wrap around the region [0, metaPages).
func TestMetadataRing(t *testing.T) {
	a, _, dev, _ := newAccounts(t)
	before := dev.Stats().HostPagesWritten
	a.Metadata(100) // more than the 64-page region
	if got := dev.Stats().HostPagesWritten - before; got != 100 {
		t.Fatalf("100 metadata pages charged %d device pages", got)
	}
	if a.MetadataPages() != 100 {
		t.Fatalf("total %d, want 100", a.MetadataPages())
	}
	if st := dev.Stats(); st.ValidPages > 64 {
		t.Fatalf("%d valid pages: the ring did not stay inside its 64 pages", st.ValidPages)
	}
}

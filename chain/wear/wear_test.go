package wear

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// TestShadowWriteBack: with the page cache modelled, the shadow is charged
// a file's data pages when a plain filesystem would write them back (one
// case per rule of docs/NANDSIM.md), each page once, and never for pages
// freed first.
func TestShadowWriteBack(t *testing.T) {
	a, db, _, shadow := newAccounts(t)
	const ps = 4096
	now := time.Unix(1000, 0)
	a.DeferWriteBack(30*time.Second, 10*ps, func() time.Time { return now })
	update := func(fn func(tx *meta.Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	rewrite := func(ino meta.Ino, pages int64) {
		t.Helper()
		update(func(tx *meta.Tx) error { return a.Commit(tx, ino, a.Rewrite(pages*ps), pages*ps) })
	}
	// Data pages charged since the last call (metadata pages left out).
	last := shadow.Stats().HostPagesWritten - a.ShadowMetadataPages()
	data := func() int64 {
		n := shadow.Stats().HostPagesWritten - a.ShadowMetadataPages()
		d := n - last
		last = n
		return d
	}
	check := func(rule string, want int64) {
		t.Helper()
		if got := data(); got != want {
			t.Fatalf("%s: %d data pages charged, want %d", rule, got, want)
		}
	}

	rewrite(1, 4)
	check("at commit", 0)
	update(func(tx *meta.Tx) error { return a.Release(tx, 1) })
	a.WriteBackAll()
	check("unlinked before the expiry", 0)

	rewrite(2, 4)
	rewrite(2, 3) // truncated and rewritten: the first 4 pages never reach the disk
	update(func(tx *meta.Tx) error {
		return a.Commit(tx, 2, Change{Dirty: []PageRange{{0, 2}}}, 3*ps) // in place, pages dirty already
	})
	now = now.Add(29 * time.Second)
	a.WriteBackDue()
	check("before the expiry", 0)
	now = now.Add(time.Second)
	a.WriteBackDue()
	check("dirty past the expiry", 3)
	a.WriteBackAll()
	check("written back already", 0)

	rewrite(3, 2)
	a.WriteBackFile(3)
	check("fsync", 2)

	rewrite(4, 6)
	now = now.Add(time.Second)
	rewrite(5, 6) // 12 dirty pages, over the limit of 10: the oldest file goes
	check("past the background limit", 6)
	if a.DirtyPages() != 6 {
		t.Fatalf("%d pages dirty after the limit's write-back, want 6", a.DirtyPages())
	}
	update(func(tx *meta.Tx) error {
		return a.Commit(tx, 5, Change{Truncated: true, TruncSize: 2 * ps, Dirty: []PageRange{{1, 1}}}, 2*ps)
	})
	a.WriteBackAll()
	check("cut to 2 pages, then unmount", 2)
	if a.DirtyPages() != 0 {
		t.Fatalf("%d pages dirty after WriteBackAll", a.DirtyPages())
	}

	boom := errors.New("boom")
	if err := db.Update(func(tx *meta.Tx) error {
		if err := a.Commit(tx, 6, a.Rewrite(3*ps), 3*ps); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	a.WriteBackAll()
	check("a failed transaction", 0)
}

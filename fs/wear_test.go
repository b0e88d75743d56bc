package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
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
		{"fsync", func(*FS) {}, func(t *testing.T, name string) { writeSynced(t, name, randomBytes(2, size)) }, false},
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

// TestChunkWriteBack: the store writes a save's encoded chunks into the page
// cache of its device file and syncs them only at fsync, so the device
// programs them when the host would write them back (docs/NANDSIM.md, the
// device's page cache): a save deleted before then costs the flash nothing,
// fsync and unmount program what is dirty.
func TestChunkWriteBack(t *testing.T) {
	const size = 2 << 20
	storeDir := filepath.Join(t.TempDir(), "store")
	m := mountStore(t, storeDir, false)
	report := func(m *testMount) *storedir.Report {
		rep, err := m.ds.Report(storedir.ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// dataProgrammed is the device pages programmed for chunks: all but
	// the metadata and staging files, which are charged by their own rules.
	dataProgrammed := func(r *storedir.Report) int64 {
		return r.Device.HostPagesWritten - r.MetadataPagesEstimate - r.StagedPages
	}
	writePieces(t, m.path("a.bin"), randomBytes(11, size))
	m.fsys.Drain()
	r := report(m)
	if got := dataProgrammed(r); got != 0 {
		t.Errorf("closed save: %d chunk pages programmed at once, want 0", got)
	}
	if r.DeviceDirtyPages < size/4096 {
		t.Errorf("closed save: %d chunk pages dirty, want at least %d", r.DeviceDirtyPages, size/4096)
	}
	dirtyA := r.DeviceDirtyPages

	var st syscall.Stat_t
	if err := syscall.Stat(m.path("a.bin"), &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("a.bin")); err != nil {
		t.Fatal(err)
	}
	forgetInodes(t, m, st.Ino) // the version is freed when the inode goes
	m.fsys.Drain()
	r = report(m)
	if dataProgrammed(r) != 0 || r.DeviceDirtyPages != 0 || r.DeviceSparedPages != dirtyA {
		t.Errorf("deleted before the write-back: %d programmed, %d dirty, %d spared; want 0, 0, %d",
			dataProgrammed(r), r.DeviceDirtyPages, r.DeviceSparedPages, dirtyA)
	}

	writeSynced(t, m.path("b.bin"), randomBytes(12, size))
	r = report(m)
	if dataProgrammed(r) < size/4096 || r.DeviceDirtyPages != 0 {
		t.Errorf("fsync: %d chunk pages programmed, %d dirty; want at least %d, 0", dataProgrammed(r), r.DeviceDirtyPages, size/4096)
	}
	afterB := dataProgrammed(r)

	writePieces(t, m.path("c.bin"), randomBytes(13, size))
	m.fsys.Drain()
	m = m.remount()
	r = report(m)
	if got := dataProgrammed(r) - afterB; got < size/4096 {
		t.Errorf("unmount: %d chunk pages of c.bin programmed, want at least %d", got, size/4096)
	}
	if r.DeviceDirtyPages != 0 {
		t.Errorf("after the remount: %d pages dirty", r.DeviceDirtyPages)
	}
}

// writeSynced creates name with data, fsyncs it and closes it.
func writeSynced(t *testing.T, name string, data []byte) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	closeT(t, f)
}

// TestAppendedLogWear: a log appended to (O_APPEND) costs a plain
// filesystem the pages from its old end on, not a rewrite of the whole
// file: the shadow is charged those (chain.Writer.Appended), so the saving
// on logs is not overstated. A writer that rewrites the file in place is
// charged the whole file, as before.
func TestAppendedLogWear(t *testing.T) {
	m := mountStore(t, filepath.Join(t.TempDir(), "store"), true)
	name := m.path("train.log")
	shadowPages := func() int64 {
		m.fsys.Drain()
		rep, err := m.ds.Report(storedir.ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Shadow.HostPagesWritten
	}
	log := bytes.Repeat([]byte("step 0 loss 1.0\n"), 64<<10) // 1 MiB: 256 pages
	writeSynced(t, name, log)
	before := shadowPages()

	log = append(log, appendLines(t, name, 0, 100)...)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("synced\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // writes the shadow's dirty pages of the file
		t.Fatal(err)
	}
	closeT(t, f)
	log = append(log, "synced\n"...)
	// Appended: about 2.3 KB, the old last page and one more, and a page
	// or two of metadata per commit.
	if got := shadowPages() - before; got > 16 {
		t.Errorf("appending 2.3 KB to a 1 MiB log charged the plain filesystem %d pages, want the appended ones", got)
	}
	wantContent(t, name, log)

	before = shadowPages()
	f, err = os.OpenFile(name, os.O_WRONLY, 0) // in place: any bytes may change
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("STEP"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	closeT(t, f)
	if got := shadowPages() - before; got < 256 {
		t.Errorf("a rewrite in place charged the plain filesystem %d pages, want the whole file's", got)
	}
}

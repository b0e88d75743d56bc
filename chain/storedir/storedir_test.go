package storedir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

func open(t *testing.T, dir, backend string) *Dir {
	t.Helper()
	ds, err := Open(dir, Options{Options: chain.Options{Policy: policy.Default(), CacheBytes: 8 << 20},
		Media: medium.Options{Device: nandsim.SmallConfig(), Backend: backend, NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func save(t *testing.T, s *chain.Store, name string, data []byte) {
	t.Helper()
	n, err := s.Names().Create(meta.RootIno, name, chain.NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(n.Ino, func() string { return name })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(data, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, s *chain.Store, name string) []byte {
	t.Helper()
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenVersion(n.Version)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out
}

// TestMemoryBackend opens a store on the memory backend through the same
// assembly a mount uses: a series saved as deltas reads back, the report
// counts it, and the backend is recorded, so a reopen says that the chunks
// are gone instead of serving a store without them.
func TestMemoryBackend(t *testing.T) {
	dir := t.TempDir()
	ds := open(t, dir, medium.Memory)
	if ds.BackendName != medium.Memory {
		t.Fatalf("backend %q, want %q", ds.BackendName, medium.Memory)
	}
	series := ckpttest.TrainingSeries(3, 200_000, 3)
	var logical int64
	for i, w := range series {
		f := ckpttest.NpyFile(w)
		logical += int64(len(f))
		save(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), f)
	}
	ds.DropCaches()
	for i, w := range series {
		if got := load(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i)); !bytes.Equal(got, ckpttest.NpyFile(w)) {
			t.Fatalf("ckpt-%d.npy read back differs", i)
		}
	}
	rep, err := ds.Report(ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LogicalBytes != logical || rep.Files != len(series) {
		t.Errorf("report: %d logical bytes in %d files, want %d in %d", rep.LogicalBytes, rep.Files, logical, len(series))
	}
	if rep.StoredBytes <= 0 || rep.StoredBytes >= logical {
		t.Errorf("report: %d bytes stored for %d logical: the series did not delta", rep.StoredBytes, logical)
	}
	// The device holds metadata only: the chunks were not programmed.
	if rep.Device.HostPagesWritten*int64(rep.Device.PageSize) >= rep.StoredBytes {
		t.Errorf("device written %d pages with chunks kept in memory", rep.Device.HostPagesWritten)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{NoSync: true}}); err == nil ||
		!strings.Contains(err.Error(), "in memory") {
		t.Fatalf("reopening a memory store: %v, want an error saying its chunks were in memory", err)
	}
}

// TestBackendRecorded: a store keeps the backend it was made with; asking
// for another one is refused, and a store that recorded none (made before
// backends were recorded) is on the SSD.
func TestBackendRecorded(t *testing.T) {
	dir := t.TempDir()
	ds := open(t, dir, "")
	if ds.BackendName != medium.SSD {
		t.Fatalf("default backend %q, want %q", ds.BackendName, medium.SSD)
	}
	data := ckpttest.NpyFile(ckpttest.TrainingSeries(5, 50_000, 1)[0])
	save(t, ds.Store, "a.npy", data)
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{Backend: medium.Memory, NoSync: true}}); err == nil {
		t.Fatal("an SSD store opened as a memory store")
	}
	ds = open(t, dir, "")
	defer ds.Close()
	if got := load(t, ds.Store, "a.npy"); !bytes.Equal(got, data) {
		t.Fatal("reopened store reads back different bytes")
	}
}

// TestUnknownBackend is refused with the name in the error.
func TestUnknownBackend(t *testing.T) {
	_, err := Open(t.TempDir(), Options{Options: chain.Options{Policy: policy.Default()}, Media: medium.Options{Backend: "tape", NoSync: true}})
	if err == nil || !strings.Contains(err.Error(), `"tape"`) {
		t.Fatalf("backend tape: %v", err)
	}
}

// TestLocked: a store held by another opener is refused with meta.ErrLocked.
func TestLocked(t *testing.T) {
	dir := t.TempDir()
	ds := open(t, dir, "")
	defer ds.Close()
	_, err := medium.Open(dir, medium.Options{})
	if !errors.Is(err, meta.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// What the page caches spared stays in the report across mounts: a
// report after the unmount shows the every-save figure a training saving
// minutes apart would see, not only what these saves, seconds apart, cost.
func TestSparedPagesKeptAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	ds := open(t, dir, medium.SSD)
	ds.ModelShadowWriteBack(time.Hour, 1<<30)
	series := ckpttest.TrainingSeries(5, 100_000, 3)
	for i, w := range series {
		save(t, ds.Store, "ckpt.npy", ckpttest.NpyFile(w))
		if i < len(series)-1 { // the next save replaces it, as a rotation does
			if err := ds.Names().Unlink(meta.RootIno, "ckpt.npy", func(meta.Ino) bool { return false }); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := ds.Report(ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if before.ShadowSparedPages == 0 {
		t.Fatalf("saves replaced within the expiry spared the shadow nothing: %+v", before.Summary)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ds = open(t, dir, medium.SSD)
		after, err := ds.Report(ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.ShadowSparedPages != before.ShadowSparedPages || after.DeviceSparedPages != before.DeviceSparedPages {
			t.Errorf("spared after reopening: device %d, shadow %d; before: %d, %d", after.DeviceSparedPages,
				after.ShadowSparedPages, before.DeviceSparedPages, before.ShadowSparedPages)
		}
		dev := after.Device.HostPagesWritten + after.DeviceDirtyPages + after.DeviceSparedPages
		shadow := after.Shadow.HostPagesWritten + after.ShadowDirtyPages + after.ShadowSparedPages
		if want := float64(dev) / float64(shadow); after.WrittenVolumeRatioEveryCommit != want {
			t.Errorf("every-save ratio %.4f after reopening, want %.4f", after.WrittenVolumeRatioEveryCommit, want)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

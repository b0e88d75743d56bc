package replay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/replay"
	"github.com/ckptfs/ckptfs/nandsim"
)

// smallDevice is a 64 MiB simulated SSD: room for the tests' series,
// without the default device's 32 GiB of FTL maps.
// writeSeries writes n .npy checkpoints of a drifting float32 training run
// as dir/run/ckpt-<i>/model.npy (one family), and returns their paths and
// sizes.
func writeSeries(t *testing.T, dir string, n, elems int) ([]string, []int64) {
	t.Helper()
	var paths []string
	var sizes []int64
	for i, vals := range ckpttest.TrainingSeries(7, elems, n) {
		p := filepath.Join(dir, "run", fmt.Sprintf("ckpt-%d", i), "model.npy")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := ckpttest.NpyFile(vals)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		sizes = append(sizes, int64(len(b)))
	}
	return paths, sizes
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func TestRunSeries(t *testing.T) {
	files, sizes := writeSeries(t, t.TempDir(), 4, 256<<10)
	var lastDone, lastTotal int64
	var backwards bool
	res, err := replay.Run(files, replay.Options{Policy: policy.Default(), Device: nandsim.SmallConfig(), WorkDir: t.TempDir(),
		Progress: func(done, total int64) {
			backwards = backwards || done < lastDone
			lastDone, lastTotal = done, total
		}})
	if err != nil {
		t.Fatal(err)
	}

	if len(res.Steps) != len(files) {
		t.Fatalf("%d steps, want %d", len(res.Steps), len(files))
	}
	var devPages, shadowPages int64
	for i, s := range res.Steps {
		// Paths are kept below the files' common directory (run/).
		if want := fmt.Sprintf("ckpt-%d/model.npy", i); s.Path != want {
			t.Errorf("step %d: path %q, want %q", i, s.Path, want)
		}
		if s.LogicalBytes != sizes[i] {
			t.Errorf("step %d: logical bytes %d, file has %d", i, s.LogicalBytes, sizes[i])
		}
		if !s.Verified {
			t.Errorf("step %d: not verified", i)
		}
		if s.DevicePagesWritten <= 0 || s.ShadowPagesWritten <= 0 {
			t.Errorf("step %d: device pages %d, shadow pages %d, want both > 0", i, s.DevicePagesWritten, s.ShadowPagesWritten)
		}
		// The plain filesystem writes at least the file's pages.
		if need := (sizes[i] + 4095) / 4096; s.ShadowPagesWritten < need {
			t.Errorf("step %d: shadow wrote %d pages, the file needs %d", i, s.ShadowPagesWritten, need)
		}
		if s.Format != "npy" {
			t.Errorf("step %d: format %q, want npy", i, s.Format)
		}
		if s.StoredBytes <= 0 || s.StoredBytes >= s.LogicalBytes {
			t.Errorf("step %d: stored %d of %d bytes, want some but fewer", i, s.StoredBytes, s.LogicalBytes)
		}
		if s.SaveMs <= 0 {
			t.Errorf("step %d: save took %v simulated ms", i, s.SaveMs)
		}
		if i > 0 {
			// Each save deltas against the previous one: a chain,
			// and fewer pages than the baseline.
			if s.Depth == 0 {
				t.Errorf("step %d: depth 0, want a delta", i)
			}
			if s.DevicePagesWritten >= res.Steps[0].DevicePagesWritten {
				t.Errorf("step %d: %d device pages, baseline took %d: delta saved nothing",
					i, s.DevicePagesWritten, res.Steps[0].DevicePagesWritten)
			}
			if s.UsefulPages <= res.Steps[i-1].UsefulPages {
				t.Errorf("step %d: useful pages %d not above the previous %d with every version kept",
					i, s.UsefulPages, res.Steps[i-1].UsefulPages)
			}
		}
		devPages += s.DevicePagesWritten
		shadowPages += s.ShadowPagesWritten
	}
	if res.Steps[0].Depth != 0 {
		t.Errorf("first step depth %d, want 0 (a baseline)", res.Steps[0].Depth)
	}

	total := sum(sizes)
	if res.LogicalBytes != total || res.LiveBytes != total {
		t.Errorf("report: logical %d live %d bytes, files hold %d", res.LogicalBytes, res.LiveBytes, total)
	}
	if res.Files != len(files) {
		t.Errorf("report: %d files, want %d", res.Files, len(files))
	}
	// The steps' pages are all on the devices; the report adds only
	// metadata written outside them.
	if res.Device.HostPagesWritten < devPages || res.Shadow.HostPagesWritten < shadowPages {
		t.Errorf("report: device %d shadow %d pages written, steps add up to %d and %d",
			res.Device.HostPagesWritten, res.Shadow.HostPagesWritten, devPages, shadowPages)
	}
	// Nearly identical float32 checkpoints: ckptfs writes less than a
	// plain filesystem.
	if r := res.WrittenVolumeRatio; r <= 0 || r >= 1 {
		t.Errorf("written volume ratio %v, want in (0, 1)", r)
	}
	if last := res.Steps[len(res.Steps)-1].UsefulPages; res.UsefulStoragePages != last {
		t.Errorf("report: useful pages %d, last step says %d", res.UsefulStoragePages, last)
	}
	if len(res.FamilyRows) != 1 || res.FamilyRows[0].Versions != uint64(len(files)) {
		t.Errorf("families %+v, want one of %d versions", res.FamilyRows, len(files))
	}
	if backwards || lastDone != total || lastTotal != total {
		t.Errorf("progress: last %d of %d (backwards %v), want %d of %d", lastDone, lastTotal, backwards, total, total)
	}
}

// KeepLatest deletes each file once the next of its family is saved: one
// file is left, yet every save counts.
func TestRunKeepLatest(t *testing.T) {
	files, sizes := writeSeries(t, t.TempDir(), 3, 64<<10)
	res, err := replay.Run(files, replay.Options{Policy: policy.Default(), Device: nandsim.SmallConfig(), WorkDir: t.TempDir(), KeepLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 1 || res.LiveBytes != sizes[len(sizes)-1] {
		t.Errorf("%d files of %d bytes left, want 1 of %d", res.Files, res.LiveBytes, sizes[len(sizes)-1])
	}
	if res.LogicalBytes != sum(sizes) {
		t.Errorf("logical bytes %d, want every save's %d", res.LogicalBytes, sum(sizes))
	}
	if len(res.FileRows) != 1 || res.FileRows[0].Path != "ckpt-2/model.npy" {
		t.Errorf("files left %+v, want ckpt-2/model.npy", res.FileRows)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	files, _ := writeSeries(t, dir, 1, 1024)
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"no files", nil, "no files"},
		{"a directory", []string{files[0], filepath.Join(dir, "run")}, "not a regular file"},
		{"missing file", []string{files[0], filepath.Join(dir, "absent.npy")}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			res, err := replay.Run(tc.files, replay.Options{Policy: policy.Default(), Device: nandsim.SmallConfig(), WorkDir: work})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want an error saying %q", res, err, tc.want)
			}
			// The throw-away store goes, even when Run fails.
			if left, _ := os.ReadDir(work); len(left) != 0 {
				t.Errorf("work dir keeps %d entries after a failed run", len(left))
			}
		})
	}
}

// deviceImage is the file that backs the throw-away store's simulated SSD,
// below Options.WorkDir. Replay exposes no hook between a save and its
// read-back, but it reports progress during the read-back and keeps its
// store below WorkDir: that is the seam this test corrupts through.
func deviceImage(t *testing.T, work string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(work, "*", "device.img"))
	if err != nil || len(m) != 1 {
		t.Fatalf("found device images %v (%v) below %s: replay no longer keeps its device in a file, so this test cannot corrupt it", m, err, work)
	}
	return m[0]
}

// corrupt flips every bit of the device's content.
func corrupt(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Replay must notice a device that does not give back what was saved: the
// device is damaged after the last file is committed, while it is read
// back.
func TestRunDetectsCorruptDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{
		// With next to no plain-chunk memory, the read-back must rebuild
		// every chunk from the device.
		{name: "no chunk cache", cache: 1},
		// With the default cache the save's plain chunks are in the
		// reference tier; the read-back must not be served from it.
		{name: "default cache", cache: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 4 MiB files: the read-back runs in 1 MiB pieces, and the
			// chunks of the last pieces are read only after the first
			// piece's progress report, where the device is damaged.
			files, sizes := writeSeries(t, t.TempDir(), 2, 1<<20)
			work := t.TempDir()
			readBackStarted := sizes[0] + sizes[1]/2 // progress counts half a file for its save
			damaged := false
			res, err := replay.Run(files, replay.Options{Policy: policy.Default(), Device: nandsim.SmallConfig(), WorkDir: work,
				CacheBytes: tc.cache,
				Progress: func(done, total int64) {
					if !damaged && done > readBackStarted {
						damaged = true
						corrupt(t, deviceImage(t, work))
					}
				}})
			if !damaged {
				t.Fatal("progress never reported the last file's read-back")
			}
			if err == nil {
				t.Fatalf("replay verified %d steps of a corrupted device", len(res.Steps))
			}
			if !strings.Contains(err.Error(), "read back") || !strings.Contains(err.Error(), "ckpt-1") {
				t.Errorf("error %q does not blame the read-back of the last file", err)
			}
		})
	}
}

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

func runReport(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"report"}, args...))
	err := root.Execute()
	return out.String(), err
}

// checkPage checks that dir holds exactly the PNG charts want, that each
// decodes as a PNG of the chart size, that index.html shows each of them and
// no other image, and that it says why each chart in missing is not drawn.
func checkPage(t *testing.T, dir string, want, missing []string) {
	t.Helper()
	for _, f := range want {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("chart %s not written: %v", f, err)
			continue
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s is not a PNG: %v", f, err)
			continue
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
			t.Errorf("%s is %dx%d pixels, want a full-size chart", f, b.Dx(), b.Dy())
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	var got []string
	for _, p := range pngs {
		got = append(got, filepath.Base(p))
	}
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) {
		t.Errorf("charts written %v, want %v", got, sorted)
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, m := range regexp.MustCompile(`<img src="([^"]+)"`).FindAllStringSubmatch(string(html), -1) {
		shown = append(shown, m[1])
	}
	slices.Sort(shown)
	if !slices.Equal(shown, sorted) {
		t.Errorf("index.html shows %v, want %v", shown, sorted)
	}
	if n := strings.Count(string(html), "Not drawn:"); n != len(missing) {
		t.Errorf("index.html explains %d missing charts, want %d (%v)", n, len(missing), missing)
	}
}

// fakeSteps is a replay of n checkpoints whose erases grow with the step.
func fakeResult(n int, withErases bool, devPages int64) map[string]any {
	var steps []map[string]any
	for i := 0; i < n; i++ {
		s := map[string]any{"path": fmt.Sprintf("run/ckpt-%06d.pt", 100*(i+1)), "logical_bytes": 8 << 20,
			"stored_bytes": 5 << 20, "device_pages_written": devPages + int64(i), "shadow_pages_written": 2048,
			"chain_depth": i % 3, "save_ms": 50.0, "restore_ms": 40.0, "useful_storage_pages": 1500 * (i + 1), "verified": true}
		if withErases {
			s["device_erases"], s["shadow_erases"] = 3*i, 4*i
		}
		steps = append(steps, s)
	}
	stats := func(erases int64) nandsim.Stats {
		return nandsim.Stats{PageSize: 4096, HostPagesWritten: 2048 * int64(n), Erases: erases,
			EraseHistogram: []nandsim.EraseBin{{Lo: 0, Hi: 0, Blocks: 900}, {Lo: 1, Hi: 1, Blocks: erases - 6}, {Lo: 2, Hi: 2, Blocks: 3}}}
	}
	return map[string]any{"codec": "planes", "scheme": "progressive", "snap_dis": "5", "written_volume_ratio": 0.7,
		"device": stats(30), "shadow": stats(40), "steps": steps}
}

func writeJSONFile(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "replay.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReportFromCompare(t *testing.T) {
	in := writeJSONFile(t, map[string]any{"methods": []map[string]any{
		{"method": "complete", "result": fakeResult(6, true, 2048)},
		{"method": "planes_pr", "result": fakeResult(6, true, 1400)},
	}})
	out := filepath.Join(t.TempDir(), "page")
	if _, err := runReport(t, "--from", in, "--out", out); err != nil {
		t.Fatal(err)
	}
	checkPage(t, out, []string{"methods_written.png", "methods_erases.png", "bytes_written.png",
		"cumulative_erases.png", "erase_histogram.png", "chain_depth.png"}, nil)
	html, _ := os.ReadFile(filepath.Join(out, "index.html"))
	for _, m := range []string{"complete", "planes_pr", "0.700"} {
		if !strings.Contains(string(html), "<td>"+m+"</td>") {
			t.Errorf("summary table lacks %q", m)
		}
	}
}

func TestReportFromReplayWithoutErases(t *testing.T) {
	in := writeJSONFile(t, fakeResult(4, false, 1500))
	out := t.TempDir()
	if _, err := runReport(t, "--from", in, "--out", out); err != nil {
		t.Fatal(err)
	}
	checkPage(t, out, []string{"bytes_written.png", "erase_histogram.png", "chain_depth.png"}, []string{"cumulative_erases.png"})
}

func TestReportRejects(t *testing.T) {
	notReplay := writeJSONFile(t, map[string]any{"logical_bytes": 5})
	uneven := writeJSONFile(t, map[string]any{"methods": []map[string]any{
		{"method": "a", "result": fakeResult(3, false, 100)}, {"method": "b", "result": fakeResult(4, false, 100)}}})
	out := t.TempDir()
	for _, args := range [][]string{
		{"--from", notReplay, "--out", out},
		{"--from", uneven, "--out", out},
		{"--from", notReplay},
		{"--from", notReplay, "--store", out, "--out", out},
		{"--out", out},
	} {
		if _, err := runReport(t, args...); err == nil {
			t.Errorf("report %v succeeded", args)
		}
	}
}

// TestReportFromStore writes a real store (three drifting float32 .npy
// checkpoints of one family on a 64 MiB preconditioned device, so that blocks
// get erased) and draws it.
func TestReportFromStore(t *testing.T) {
	dir := t.TempDir()
	dev, err := deviceForSize("64MiB")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := storedir.Open(dir, storedir.Options{Options: chain.Options{Policy: policy.Default()},
		Media: medium.Options{Device: dev, Precondition: true}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, 1<<20)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	for v := 1; v <= 3; v++ {
		for i := range w {
			w[i] *= 1 + float32(rng.NormFloat64()*1e-3)
		}
		name := fmt.Sprintf("ckpt-%d.npy", v)
		n, err := ds.Names().Create(meta.RootIno, name, chain.NewNode{Mode: 0o100644})
		if err != nil {
			t.Fatal(err)
		}
		wr, err := ds.NewWriter(n.Ino, func() string { return name })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wr.WriteAt(npyFloat32(w), 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := wr.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := runReport(t, "--store", dir, "--out", out); err != nil {
		t.Fatal(err)
	}
	checkPage(t, out, []string{"stored_vs_logical.png", "erase_histogram.png", "chain_depth.png"}, nil)
	html, _ := os.ReadFile(filepath.Join(out, "index.html"))
	if !strings.Contains(string(html), dir) {
		t.Error("the page does not name the store")
	}
}

// npyFloat32 is a NumPy .npy file (format 1.0) of a float32 vector.
func npyFloat32(v []float32) []byte {
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", len(v))
	pad := 64 - (10+len(hdr)+1)%64
	hdr += strings.Repeat(" ", pad%64) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	b = append(b, hdr...)
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

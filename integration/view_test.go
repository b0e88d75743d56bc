package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestViewTorch saves torch.save and safetensors series into a mount of
// the split16 codec and of the default codec, and loads every file of
// .ckptfs/view/bf16 with torch.load (mapped and not) and safe_open: each
// float32 tensor must be its exact value cut to bfloat16, every other
// value exact, and the daemon must log no error.
func TestViewTorch(t *testing.T) {
	py := venvPython(t) // torch 2.x and safetensors
	for _, codec := range []string{"split16", "scaled"} {
		t.Run(codec, func(t *testing.T) {
			m := newMount(t, "--codec", codec)
			run := m.path("run")
			if err := os.Mkdir(run, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(py, "py/tier_check.py", "write", run, "6").CombinedOutput(); err != nil {
				t.Fatalf("write: %v\n%s", err, out)
			}
			view := filepath.Join(m.dir, ".ckptfs", "view", "bf16", "run")
			out, err := exec.Command(py, "py/view_check.py", "check", view, m.path("expect.pt")).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "12" {
				t.Fatalf("view: %v\n%s", err, out)
			}
			var rep struct {
				Codec string `json:"codec"`
			}
			if m.liveStats(&rep); rep.Codec != codec {
				t.Fatalf("stats.json: codec %q, want %s", rep.Codec, codec)
			}
			// The exact files are untouched by reading their view.
			if out, err := exec.Command(py, "py/tier_check.py", "check", run).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
				t.Fatalf("exact files after the view: %v\n%s", err, out)
			}
		})
	}
}

// replicaFetched is bytes_fetched of a read-only mount's stats.json: what
// its reads fetched from the bucket.
func (m *mount) replicaFetched() int64 {
	m.t.Helper()
	var st struct {
		BytesFetched *int64 `json:"bytes_fetched"`
	}
	if m.liveStats(&st); st.BytesFetched == nil {
		m.t.Fatal("stats.json has no bytes_fetched")
	}
	return *st.BytesFetched
}

// TestRemoteViewTorch saves torch.save and safetensors series into a
// split16 mount replicating to S3, and reads them back through two
// read-only mounts of the bucket on empty stores: one loads every file of
// its .ckptfs/view/bf16 (each float32 tensor cut to bfloat16, the rest
// exact), the other reads the exact files. The view fetches each chunk's
// high records only: much less than the exact files fetch.
func TestRemoteViewTorch(t *testing.T) {
	py := venvPython(t)
	srv := startS3(t)
	m := newMount(t, "--codec", "split16", "--device-size", "256MiB", "--remote", remoteURL, "--remote-writer", soloWriter, "--endpoint", srv.Endpoint)
	run := m.path("run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "py/tier_check.py", "write", run, "6").CombinedOutput(); err != nil {
		t.Fatalf("write: %v\n%s", err, out)
	}
	// The expected tensors, kept off the replicas' fetch counts.
	expect := filepath.Join(t.TempDir(), "expect.pt")
	exp, err := os.ReadFile(m.path("expect.pt"))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, expect, exp)
	files := map[string][]byte{}
	logical := int64(len(exp))
	ents, err := os.ReadDir(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(run, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()], logical = b, logical+int64(len(b))
	}
	m.waitUploaded(logical, 2*time.Minute)

	views := replicaMount(t, srv)
	out, err := exec.Command(py, "py/view_check.py", "check", filepath.Join(views.dir, ".ckptfs", "view", "bf16", "run"), expect).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "12" {
		t.Fatalf("view from the bucket: %v\n%s", err, out)
	}
	viewFetched := views.replicaFetched()

	exact := replicaMount(t, srv)
	for name, want := range files {
		got, err := os.ReadFile(exact.path("run/" + name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("exact %s from the bucket: %v", name, err)
		}
	}
	exactFetched := exact.replicaFetched()
	ratio := float64(viewFetched) / float64(exactFetched)
	t.Logf("fetched: view %d bytes, exact %d (%.3f); files %d bytes", viewFetched, exactFetched, ratio, logical-int64(len(exp)))
	if viewFetched == 0 || ratio > 0.5 {
		t.Fatalf("the view fetched %d bytes, %.3f of the exact files' %d: not the high records alone", viewFetched, ratio, exactFetched)
	}
}

// npzViewCheck saves three .npz files of drifting float32 arrays (and an
// int array) with np.savez into argv[1], then loads each from the views
// (argv[2]: .ckptfs/view) with np.load, which checks every member's
// CRC-32: float32 arrays must be their exact values cut to bfloat16 in
// bf16/, rounded to float16 in fp16/ (as numpy's astype does), the rest
// exact.
const npzViewCheck = `
import os, sys
import numpy as np
d, views = sys.argv[1], sys.argv[2]
view, fp16 = os.path.join(views, "bf16"), os.path.join(views, "fp16")
rng = np.random.default_rng(3)
w = rng.standard_normal(300_000).astype(np.float32)
steps = np.arange(1000, dtype=np.int64)
for k in range(3):
    w += rng.standard_normal(w.size).astype(np.float32) * 1e-4
    np.savez(os.path.join(d, "ckpt-%d.npz" % k), weights=w, steps=steps)
    with np.load(os.path.join(view, "ckpt-%d.npz" % k)) as z:
        assert np.array_equal(z["weights"].view(np.uint32), w.view(np.uint32) & np.uint32(0xFFFF0000)), k
        assert np.array_equal(z["steps"], steps), k
    with np.load(os.path.join(fp16, "ckpt-%d.npz" % k)) as z:
        assert np.array_equal(z["weights"], w.astype(np.float16).astype(np.float32)), k
        assert np.array_equal(z["steps"], steps), k
print("ok")
`

// TestViewNpz: np.load of an .npz in the bf16 and fp16 views (whose
// members' CRCs the view corrects) in mounts of both codecs.
func TestViewNpz(t *testing.T) {
	py := venvPython(t)
	for _, codec := range []string{"split16", "scaled"} {
		t.Run(codec, func(t *testing.T) {
			m := newMount(t, "--codec", codec)
			out, err := exec.Command(py, "-c", npzViewCheck, m.dir, filepath.Join(m.dir, ".ckptfs", "view")).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Fatalf("np.load of the view: %v\n%s", err, out)
			}
		})
	}
}

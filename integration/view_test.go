package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
			if b, err := os.ReadFile(m.path(".ckptfs/stats.json")); err != nil || json.Unmarshal(b, &rep) != nil || rep.Codec != codec {
				t.Fatalf("stats.json: codec %q (%v), want %s", rep.Codec, err, codec)
			}
			// The exact files are untouched by reading their view.
			if out, err := exec.Command(py, "py/tier_check.py", "check", run).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
				t.Fatalf("exact files after the view: %v\n%s", err, out)
			}
		})
	}
}

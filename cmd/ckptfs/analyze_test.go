package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writersDir holds real checkpoints from today's writers (shared/ lies
// beside the repository root).
const writersDir = "../../../shared/fixtures/writers"

// writerFixtures returns the paths of files under writersDir; a missing
// folder fails the test when CKPTFS_REQUIRE_DEPS=1 and skips it otherwise.
func writerFixtures(t *testing.T, rel ...string) []string {
	t.Helper()
	if _, err := os.Stat(writersDir); err != nil {
		msg := "writer fixtures missing (" + writersDir + "): " + err.Error()
		if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg + " (set CKPTFS_REQUIRE_DEPS=1 to fail instead)")
	}
	var paths []string
	for _, r := range rel {
		paths = append(paths, filepath.Join(writersDir, r))
	}
	return paths
}

// TestAnalyzeShowsTorchNames: the per-tensor table of two torch.save files
// names tensors as the state dict does; --json keeps the storage key too.
func TestAnalyzeShowsTorchNames(t *testing.T) {
	files := writerFixtures(t, "torch/ckpt_0010.pt", "torch/ckpt_0020.pt")
	out, err := runCkptfs(t, append([]string{"analyze", "--tensors"}, files...)...)
	if err != nil {
		t.Fatal(err, out)
	}
	if !strings.Contains(out, "\nmodel.transformer.h.0.attn.c_attn.weight ") || strings.Contains(out, "\ndata/") {
		t.Fatalf("analyze --tensors does not name the tensors:\n%s", out)
	}
	out, err = runCkptfs(t, append([]string{"analyze", "--json"}, files...)...)
	if err != nil {
		t.Fatal(err, out)
	}
	var an struct {
		Tensors []struct{ Name, Key string }
	}
	if err := json.Unmarshal([]byte(out), &an); err != nil {
		t.Fatal(err)
	}
	for _, tc := range an.Tensors {
		if tc.Name == "model.transformer.wte.weight" && strings.HasPrefix(tc.Key, "data/") {
			return
		}
	}
	t.Fatalf("--json has no tensor named model.transformer.wte.weight with a storage key: %s", out[:min(len(out), 2000)])
}

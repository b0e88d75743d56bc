package analyze

import (
	"os"
	"path/filepath"
	"testing"
)

// writersDir holds real checkpoints from today's writers (shared/ lies
// beside the repository root; see its README.md).
const writersDir = "../../../shared/fixtures/writers"

// writerFixture returns the path of a file under writersDir. A missing
// folder fails the test when CKPTFS_REQUIRE_DEPS=1 and skips it loudly
// otherwise.
func writerFixture(t *testing.T, rel string) string {
	t.Helper()
	if _, err := os.Stat(writersDir); err != nil {
		msg := "writer fixtures missing (" + writersDir + "): " + err.Error()
		if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg + " (set CKPTFS_REQUIRE_DEPS=1 to fail instead)")
	}
	p := filepath.Join(writersDir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("writer fixture %s: %v", rel, err) // the folder is there: a missing file is a bug
	}
	return p
}

// TestCompareNamesTorchTensors: analyze pairs and shows torch.save'd
// tensors by the state dict's names, and keeps their storage keys.
func TestCompareNamesTorchTensors(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		names []string
	}{
		{"torch/ckpt_0010.pt", "torch/ckpt_0020.pt", []string{
			"model.transformer.h.0.attn.c_attn.weight", "model.transformer.wte.weight", "optimizer.state.3.exp_avg"}},
		{"hf/checkpoint-20/optimizer.pt", "hf/checkpoint-30/optimizer.pt", []string{
			"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step"}},
	} {
		an, err := Compare(writerFixture(t, c.a), writerFixture(t, c.b))
		if err != nil {
			t.Fatal(err)
		}
		if an.OnlyInA != 0 || an.OnlyInB != 0 || len(an.Tensors) == 0 {
			t.Fatalf("%s vs %s: %d compared, %d only in A, %d only in B", c.a, c.b, len(an.Tensors), an.OnlyInA, an.OnlyInB)
		}
		byName := map[string]TensorChanges{}
		for _, tc := range an.Tensors {
			if tc.Name == "" || tc.Key == "" {
				t.Fatalf("%s: tensor %+v lacks a name or key", c.a, tc)
			}
			byName[tc.Name] = tc
		}
		for _, n := range c.names {
			tc, ok := byName[n]
			if !ok {
				t.Fatalf("%s: no tensor named %s among %d", c.a, n, len(byName))
			}
			if len(tc.Key) < len("data/0") || tc.Key[:5] != "data/" {
				t.Fatalf("%s: %s has key %q, want its storage key data/N", c.a, n, tc.Key)
			}
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/encode"
)

// TestLoadSeries reads a set's raw checkpoints in order and refuses a
// directory make series did not finish, saying what to run.
func TestLoadSeries(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "adam")
	if err := os.MkdirAll(set, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSeries(dir, "adam", "fp32", encode.Float32); err == nil || !strings.Contains(err.Error(), "make series") {
		t.Fatalf("unfinished series: %v", err)
	}
	for i, b := range [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}} {
		name := filepath.Join(set, "ckpt-00000"+string(rune('1'+i))+".fp32.raw")
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(set, ".done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadSeries(dir, "adam", "fp32", encode.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.files) != 2 || s.files[0][0] != 1 || s.files[1][0] != 5 {
		t.Fatalf("files %v", s.files)
	}
	if p := s.deltaPairs(); len(p) != 1 || p[0].plain[0] != 5 || p[0].ref[0] != 1 {
		t.Fatalf("delta pairs %v", p)
	}
}

// TestMLPLayout: the Adam layout holds the weights and both moments of
// every parameter, and a step counter each.
func TestMLPLayout(t *testing.T) {
	count := map[string]int{}
	for _, ts := range mlpLayout(true) {
		count[ts.role] += ts.n
	}
	params := 512*256 + 512 + 2*(512*512+512) + 10*512 + 10
	if count["weights"] != params || count["exp_avg"] != params || count["exp_avg_sq"] != params || count["step"] != 8 {
		t.Fatalf("layout %v, want %d per role and 8 steps", count, params)
	}
	for _, ts := range mlpLayout(false) {
		if ts.role == "exp_avg" {
			t.Fatal("an SGD layout with Adam's moments")
		}
	}
}

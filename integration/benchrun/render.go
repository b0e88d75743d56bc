package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// serveRender rewrites DIR/BENCHMARKS.md from DIR/benchmarks.json, running
// nothing: `benchrun render docs` after a change to how figures are shown.
func serveRender(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: benchrun render DIR")
	}
	b, err := os.ReadFile(filepath.Join(args[0], "benchmarks.json"))
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("benchmarks.json: %w", err)
	}
	doc, err := renderDoc(&r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(args[0], "BENCHMARKS.md"), []byte(doc), 0o644)
}

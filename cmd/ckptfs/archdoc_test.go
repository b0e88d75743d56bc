package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ckptfs/ckptfs/"

// TestArchitectureGraph holds docs/ARCHITECTURE.md's package graph to the
// code: every project import of every non-test package, as go list sees
// it, is in the block, and the block names nothing the code does not
// import. Packages that import nothing of the project are left out.
func TestArchitectureGraph(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("!! SKIPPED: no go command to list the packages")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	code := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if strings.HasPrefix(pkg, "integration") || strings.Contains(pkg, "/internal/") {
			continue
		}
		var deps []string
		for _, imp := range fields[1:] {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				deps = append(deps, dep)
			}
		}
		if len(deps) > 0 {
			slices.Sort(deps)
			code[pkg] = deps
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedGraph(t, string(doc))
	for pkg, deps := range code {
		if got := documented[pkg]; !slices.Equal(got, deps) {
			t.Errorf("ARCHITECTURE.md: %s -> %v; the code imports %v", pkg, got, deps)
		}
	}
	for pkg := range documented {
		if code[pkg] == nil {
			t.Errorf("ARCHITECTURE.md lists %s, which imports nothing of the project", pkg)
		}
	}
}

// documentedGraph parses the package graph block: "pkg -> deps", with
// continuation lines, and parenthesised notes left out.
func documentedGraph(t *testing.T, doc string) map[string][]string {
	start := strings.Index(doc, "Package graph (")
	if start < 0 {
		t.Fatal("ARCHITECTURE.md has no package graph")
	}
	block := doc[start:]
	open := strings.Index(block, "```\n")
	end := strings.Index(block[open+4:], "```")
	if open < 0 || end < 0 {
		t.Fatal("ARCHITECTURE.md: the package graph is not in a code block")
	}
	graph := map[string][]string{}
	var cur string
	for _, line := range strings.Split(block[open+4:open+4+end], "\n") {
		if i := strings.Index(line, "("); i >= 0 {
			line = line[:i]
		}
		if pkg, deps, ok := strings.Cut(line, "->"); ok {
			cur = strings.TrimSpace(pkg)
			line = deps
		}
		if cur == "" {
			continue
		}
		graph[cur] = append(graph[cur], strings.Fields(line)...)
	}
	for pkg := range graph {
		slices.Sort(graph[pkg])
	}
	return graph
}

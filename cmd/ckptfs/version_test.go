package main

import (
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	old := version
	defer func() { version = old }()
	version = "v1.2.3-4-gabcdef"
	out, err := runCkptfs(t, "version")
	if err != nil || out != "ckptfs v1.2.3-4-gabcdef\n" {
		t.Fatalf("version with a stamped version: %q, %v", out, err)
	}
	// Unstamped (go build, go test): the build information, else devel.
	version = ""
	out, err = runCkptfs(t, "version")
	if err != nil || !strings.HasPrefix(out, "ckptfs ") || len(strings.TrimSpace(out)) <= len("ckptfs") {
		t.Fatalf("version without a stamp: %q, %v", out, err)
	}
}

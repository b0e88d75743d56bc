package main

import (
	"regexp"
	"strings"
	"testing"
)

// pep440 is PEP 440's canonical form, as far as ckptfs versions go: a
// release, then an optional local label.
var pep440 = regexp.MustCompile(`^\d+(\.\d+)*(\+[a-z0-9]+(\.[a-z0-9]+)*)?$`)

func TestVersionCommand(t *testing.T) {
	old := version
	defer func() { version = old }()
	for stamp, want := range map[string]string{
		"v" + release:                release,
		"v1.2.3-4-gabcdef":           release + "+v1.2.3.4.gabcdef",
		"3bb5d46-dirty":              release + "+3bb5d46.dirty",
		"v" + release + "-1-gABC123": release + "+v" + release + ".1.gabc123",
		"--":                         release + "+unknown",
	} {
		version = stamp
		out, err := runCkptfs(t, "version")
		if err != nil || out != "ckptfs "+want+"\n" {
			t.Errorf("version stamped %q: %q, %v; want ckptfs %s", stamp, out, err, want)
		}
		if !pep440.MatchString(want) {
			t.Errorf("%q is not a PEP 440 version", want)
		}
	}
	// Unstamped (go build, go test): the build information, else devel.
	version = ""
	out, err := runCkptfs(t, "version")
	v := strings.TrimPrefix(strings.TrimSpace(out), "ckptfs ")
	if err != nil || !strings.HasPrefix(v, release+"+") || !pep440.MatchString(v) {
		t.Fatalf("version without a stamp: %q, %v", out, err)
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// A mount over a directory that holds files hides them: the mount says
// so, naming some, and says nothing over an empty one.
func TestWarnHidden(t *testing.T) {
	var buf bytes.Buffer
	logrus.SetOutput(&buf)
	defer logrus.SetOutput(os.Stderr)

	empty := t.TempDir()
	warnHidden(empty)
	if buf.Len() != 0 {
		t.Errorf("warned over an empty mount point: %s", buf.String())
	}

	full := t.TempDir()
	for _, n := range []string{"checkpoint-500", "checkpoint-1000", "runs", "config.json"} {
		if err := os.WriteFile(filepath.Join(full, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	warnHidden(full)
	out := buf.String()
	if !strings.Contains(out, "is not empty") || !strings.Contains(out, "checkpoint-") || !strings.Contains(out, ", ...") {
		t.Errorf("warning over a mount point holding 4 entries: %q", out)
	}
}

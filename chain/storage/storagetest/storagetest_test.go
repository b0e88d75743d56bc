package storagetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// TestSuitePassesMemstore: the suite holds a correct backend to nothing it
// does not promise.
func TestSuitePassesMemstore(t *testing.T) {
	Run(t, func(t *testing.T, _ *meta.DB) storage.Backend { return memstore.New(4096, 64) })
}

// lossy is a backend that gives back one byte wrong.
type lossy struct{ storage.Backend }

func (l lossy) ReadAt(loc storage.Location, p []byte, off int64) error {
	err := l.Backend.ReadAt(loc, p, off)
	if len(p) > 0 {
		p[len(p)/2] ^= 1
	}
	return err
}

const childEnv = "CKPTFS_STORAGETEST_CHILD"

// TestBrokenBackendChild runs the suite on the lossy backend; it fails by
// design, so it runs only as TestSuiteCatchesBrokenBackend's child.
func TestBrokenBackendChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as TestSuiteCatchesBrokenBackend's child process (it fails by design)")
	}
	Run(t, func(t *testing.T, _ *meta.DB) storage.Backend { return lossy{memstore.New(4096, 64)} })
}

// TestSuiteCatchesBrokenBackend: a backend that corrupts what it reads
// back fails the suite, in ReadBack.
func TestSuiteCatchesBrokenBackend(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenBackendChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a backend that corrupts reads:\n%s", out)
	}
	if !strings.Contains(string(out), "--- FAIL: TestBrokenBackendChild/ReadBack") {
		t.Fatalf("the suite failed, but not in ReadBack:\n%s", out)
	}
}

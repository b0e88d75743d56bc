package detect

import (
	"os"
	"path/filepath"
	"testing"
)

// writersDir holds real checkpoints from today's writers (shared/ lies beside
// the repository root; see its README.md).
const writersDir = "../../../shared/fixtures/writers"

// writerFixture reads a file under writersDir. A missing folder fails the
// test when CKPTFS_REQUIRE_DEPS=1 and skips it loudly otherwise.
func writerFixture(t *testing.T, rel string) []byte {
	t.Helper()
	if _, err := os.Stat(writersDir); err != nil {
		msg := "writer fixtures missing (" + writersDir + "): " + err.Error()
		if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg + " (set CKPTFS_REQUIRE_DEPS=1 to fail instead)")
	}
	data, err := os.ReadFile(filepath.Join(writersDir, rel))
	if err != nil {
		t.Fatalf("writer fixture %s: %v", rel, err) // the folder is there: a missing file is a bug
	}
	return data
}

package detect

import (
	"path/filepath"
	"testing"
)

func TestNumpyGenerated(t *testing.T) {
	dir := t.TempDir()
	python(t, "gen_numpy.py", dir)
	checkExpected(t, dir, readExpect(t, filepath.Join(dir, "expect-numpy.json")))
}

package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUnmountLeavesNoStagingFiles: an unmount right after a save leaves no
// staging file in the store. The last file's staging copy, kept a moment
// as the kernel's backing file after its commit, stayed on the host (the
// size of the checkpoint) until the store's next open.
func TestUnmountLeavesNoStagingFiles(t *testing.T) {
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		m := newMount(t, flags...)
		want := bigNpyOf(5, 1<<20)
		if err := os.WriteFile(m.path("last.npy"), want, 0o644); err != nil {
			t.Fatal(err)
		}
		m.stop()
		left, err := os.ReadDir(filepath.Join(m.store, "staging"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range left {
			t.Errorf("staging file %s left after the unmount", e.Name())
		}
		m.start()
		checkContent(t, m.path("last.npy"), want)
	})
}

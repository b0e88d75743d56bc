package integration

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/ckptfs/ckptfs/fs/fstest"
	"github.com/hanwen/go-fuse/v2/posixtest"
)

// TestPosix runs go-fuse's conformance suite against a mounted ckptfs, each
// case in a fresh directory of one mount.
func TestPosix(t *testing.T) {
	m := newMount(t)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := fstest.PosixExceptions[name]; ok {
				t.Skip(why)
			}
			dir := filepath.Join(m.dir, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fn(t, dir)
		})
	}
	m.stop()
	fsck(t, m.store)
}

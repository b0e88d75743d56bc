package fs

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// TestPosix runs go-fuse's conformance suite, each case on a fresh mount of
// a fresh store, in the mount's root; the store must pass a deep fsck
// after each.
func TestPosix(t *testing.T) {
	needFuse(t)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := PosixExceptions[name]; ok {
				t.Skip(why)
			}
			m := newTestMount(t)
			fn(t, m.dir)
		})
	}
}

package fs

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// skippedPosix lists the posixtest cases that do not apply, with why; it
// mirrors integration/posix_test.go.
var skippedPosix = map[string]string{
	// POSIX record locks belong to the process: two descriptors of one
	// process never conflict, and the kernel's local lock handling (ckptfs
	// does not take over locking) gives exactly that, across processes too.
	// This case expects two descriptors of one process to conflict, which
	// only open-file-description locks do; go-fuse's loopback passes it by
	// forwarding to OFD locks of the backing file.
	"FcntlFlockLocksFile": "expects OFD semantics from classic POSIX locks",
}

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
			if why, ok := skippedPosix[name]; ok {
				t.Skip(why)
			}
			m := newTestMount(t)
			fn(t, m.dir)
		})
	}
}

package fs

import (
	"sort"
	"testing"

	"github.com/ckptfs/ckptfs/fs/fstest"
	"github.com/hanwen/go-fuse/v2/posixtest"
)

// TestPosix runs go-fuse's conformance suite, each case on a fresh mount of
// a fresh store, in the mount's root; the store must pass a deep fsck
// after each. It runs in both save modes: passthrough (where the kernel
// has it) and staging files written by the daemon.
func TestPosix(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { runPosix(t, false) })
	t.Run("daemon-written", func(t *testing.T) { runPosix(t, true) })
}

func runPosix(t *testing.T, daemonWritten bool) {
	needFuse(t)
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
			m := newTestMountMode(t, nil, daemonWritten)
			fn(t, m.dir)
		})
	}
}

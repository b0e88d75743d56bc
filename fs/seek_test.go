package fs

import (
	"errors"
	"math"
	"os"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"golang.org/x/sys/unix"
)

// TestSeekHoleDataBounds (xfstests generic/448 and seek_sanity_test's end
// of file cases): SEEK_DATA and SEEK_HOLE from a negative offset, from the
// size and from beyond it fail with ENXIO, as on ext4, for a file being
// written and for a committed one, in both save modes.
func TestSeekHoleDataBounds(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testSeekBounds(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testSeekBounds(t, true) })
}

func testSeekBounds(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	t.Logf("save mode: %s", m.fsys.Mode())
	const size = 3 * 4096
	data := randomBytes(448, 4096)
	name := m.path("f")
	check := func(what string, f *os.File) {
		t.Helper()
		fd := int(f.Fd())
		// The ordinary answers first, so that ENXIO below is not all the
		// handle ever says: data at 0, the hole after the written block.
		if at, err := unix.Seek(fd, 0, unix.SEEK_DATA); err != nil || at != 0 {
			t.Errorf("%s: SEEK_DATA from 0: %d, %v; want 0", what, at, err)
		}
		if at, err := unix.Seek(fd, 1, unix.SEEK_HOLE); err != nil || at != 4096 && at != size {
			t.Errorf("%s: SEEK_HOLE from 1: %d, %v; want 4096 or %d", what, at, err, size)
		}
		for _, off := range []int64{-1, -4096, -size, math.MinInt64, size, size + 1, 1 << 40} {
			for _, whence := range []int{unix.SEEK_DATA, unix.SEEK_HOLE} {
				at, err := unix.Seek(fd, off, whence)
				if !errors.Is(err, syscall.ENXIO) {
					t.Errorf("%s: %s from %d: %d, %v; want ENXIO", what, seekName(whence), off, at, err)
				}
			}
		}
	}

	// Staged: open for writing, content written, a hole at the end.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	check("staged", f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// Committed: the commit landed, and the handle reads the version.
	m.fsys.Drain()
	f, err = os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if of := m.fsys.open.get(chain.Ino(statT(t, name).Ino)); of != nil && of.staged.Load() != nil {
		t.Fatal("the file is still staged after Drain")
	}
	check("committed", f)
}

func seekName(whence int) string {
	if whence == unix.SEEK_DATA {
		return "SEEK_DATA"
	}
	return "SEEK_HOLE"
}

package fs

import (
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fileTimes is what stat shows of a file's times, in nanoseconds.
type fileTimes struct{ atime, mtime, ctime int64 }

func timesOf(st *unix.Stat_t) fileTimes {
	return fileTimes{st.Atim.Nano(), st.Mtim.Nano(), st.Ctim.Nano()}
}

func statTimes(t *testing.T, name string) fileTimes {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatalf("stat %s: %v", name, err)
	}
	return timesOf(&st)
}

func fstatTimes(t *testing.T, f *os.File) fileTimes {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatalf("fstat %s: %v", f.Name(), err)
	}
	return timesOf(&st)
}

// tick lets the clock move past the host's timestamp granularity (a
// staging file's times are the host filesystem's, coarse to a few ms).
func tick() { time.Sleep(20 * time.Millisecond) }

// TestTruncateChangesTimes (xfstests generic/313): truncate(2) and
// ftruncate(2) of a file open for writing, down and up, change its mtime
// and ctime at once (the ctime stood still until the commit); a write does
// too. What stat shows then is what the file keeps after close and commit.
// A truncate of a file nobody writes, and an open with O_TRUNC of a file
// with content, change both as well.
func TestTruncateChangesTimes(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testTruncateTimes(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testTruncateTimes(t, true) })
}

func testTruncateTimes(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	name := m.path("f")
	changed := func(what string, before, after fileTimes) {
		t.Helper()
		if after.mtime <= before.mtime || after.ctime <= before.ctime {
			t.Errorf("%s: mtime %d -> %d, ctime %d -> %d; want both later", what, before.mtime, after.mtime, before.ctime, after.ctime)
		}
		if after.ctime < after.mtime {
			t.Errorf("%s: ctime %d before mtime %d", what, after.ctime, after.mtime)
		}
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := fstatTimes(t, f)
	tick()
	if _, err := f.Write([]byte("this is a test string")); err != nil {
		t.Fatal(err)
	}
	after := fstatTimes(t, f)
	changed("write", before, after)
	steps := []struct {
		what string
		do   func() error
	}{
		{"truncate down", func() error { return syscall.Truncate(name, 0) }},
		{"truncate up", func() error { return syscall.Truncate(name, 123) }},
		{"ftruncate down", func() error { return f.Truncate(7) }},
		{"ftruncate up", func() error { return f.Truncate(4096) }},
	}
	for _, s := range steps {
		before = after
		tick()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		after = fstatTimes(t, f)
		changed(s.what+" of an open file", before, after)
		if byPath := statTimes(t, name); byPath != after {
			t.Errorf("%s: stat shows %+v, fstat %+v", s.what, byPath, after)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tick() // past the kernel's attributes of the staged file (valid for the jiffy)
	if got := statTimes(t, name); got.mtime != after.mtime || got.ctime != after.ctime {
		t.Errorf("after close: mtime %d ctime %d, want %d and %d as before it", got.mtime, got.ctime, after.mtime, after.ctime)
	}
	m.fsys.Drain()
	tick()
	if got := statTimes(t, name); got.mtime != after.mtime || got.ctime != after.ctime {
		t.Errorf("after the commit: mtime %d ctime %d, want %d and %d as before it", got.mtime, got.ctime, after.mtime, after.ctime)
	}

	// Nobody writes it: the truncate commits at once.
	before = statTimes(t, name)
	tick()
	if err := syscall.Truncate(name, 100); err != nil {
		t.Fatal(err)
	}
	changed("truncate of a closed file", before, statTimes(t, name))

	// O_TRUNC of content, nothing written.
	before = statTimes(t, name)
	tick()
	g, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	after = fstatTimes(t, g)
	changed("open with O_TRUNC", before, after)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	tick()
	if got := statTimes(t, name); got.mtime != after.mtime || got.ctime != after.ctime {
		t.Errorf("O_TRUNC, after the commit: mtime %d ctime %d, want %d and %d", got.mtime, got.ctime, after.mtime, after.ctime)
	}
}

// TestXattrChangesCtime (xfstests generic/728): setxattr and removexattr
// change the ctime, and stat shows it at once; the mtime stays. Both for a
// committed file and for one open for writing.
func TestXattrChangesCtime(t *testing.T) {
	m := newTestMount(t)
	writePieces(t, m.path("f"), []byte("content"))
	m.fsys.Drain()
	check := func(what, name string) {
		t.Helper()
		for _, op := range []struct {
			op string
			do func() error
		}{
			{"setxattr", func() error { return unix.Setxattr(name, "user.foobar", []byte("123"), 0) }},
			{"replace", func() error { return unix.Setxattr(name, "user.foobar", []byte("456"), unix.XATTR_REPLACE) }},
			{"removexattr", func() error { return unix.Removexattr(name, "user.foobar") }},
		} {
			before := statTimes(t, name)
			tick()
			if err := op.do(); err != nil {
				t.Fatalf("%s %s: %v", op.op, what, err)
			}
			after := statTimes(t, name)
			if after.ctime <= before.ctime || after.mtime != before.mtime {
				t.Errorf("%s of %s: ctime %d -> %d, mtime %d -> %d; want a later ctime, the same mtime",
					op.op, what, before.ctime, after.ctime, before.mtime, after.mtime)
			}
		}
	}
	check("a committed file", m.path("f"))
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("a directory", m.path("d"))
	f, err := os.OpenFile(m.path("g"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	check("a file open for writing", m.path("g"))
}

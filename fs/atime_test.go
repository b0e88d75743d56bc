package fs

import (
	"os"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// readAll reads name through a fresh descriptor, as cat does.
func readAll(t *testing.T, name string) {
	t.Helper()
	if _, err := os.ReadFile(name); err != nil {
		t.Fatal(err)
	}
}

// TestReadUpdatesAtime (xfstests generic/003): on a relatime mount, the
// default, reading a file updates its atime when the atime is not newer
// than the mtime or the ctime, and leaves mtime and ctime alone; a read
// right after does not update it again. stat shows the new atime at once,
// and a read served from the kernel's page cache counts too. It was never
// updated.
func TestReadUpdatesAtime(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testReadUpdatesAtime(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testReadUpdatesAtime(t, true) })
}

func testReadUpdatesAtime(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	name := m.path("f")
	writePieces(t, name, randomBytes(3, 200_000))
	m.fsys.Drain()
	before := statTimes(t, name)
	tick()
	readAll(t, name)
	after := statTimes(t, name)
	if after.atime <= before.atime || after.atime < after.mtime {
		t.Errorf("first read: atime %d -> %d (mtime %d); want it updated past the mtime", before.atime, after.atime, after.mtime)
	}
	if after.mtime != before.mtime || after.ctime != before.ctime {
		t.Errorf("first read changed mtime %d -> %d or ctime %d -> %d", before.mtime, after.mtime, before.ctime, after.ctime)
	}

	tick()
	readAll(t, name)
	if again := statTimes(t, name); again != after {
		t.Errorf("second read: %+v -> %+v; relatime leaves a fresh atime", after, again)
	}

	// Changed since, in place: the next read counts again, though the
	// kernel holds the whole file in its page cache (the first read filled
	// it, the write went through it).
	tick()
	g, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("new content"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	changed := statTimes(t, name)
	if changed.mtime <= after.atime {
		t.Fatalf("write: mtime %d not past the atime %d", changed.mtime, after.atime)
	}
	tick()
	readAll(t, name)
	if got := statTimes(t, name); got.atime <= changed.mtime || got.mtime != changed.mtime || got.ctime != changed.ctime {
		t.Errorf("read after a write: %+v -> %+v; want only the atime updated, past the mtime", changed, got)
	}

	// A chmod moves the ctime past the atime: the next read counts, though
	// the kernel would serve it from the pages the last read left.
	readAll(t, name)
	before = statTimes(t, name)
	tick()
	if err := os.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	chmodded := statTimes(t, name)
	if chmodded.ctime <= before.atime {
		t.Fatalf("chmod: ctime %d not past the atime %d", chmodded.ctime, before.atime)
	}
	tick()
	readAll(t, name)
	if got := statTimes(t, name); got.atime <= chmodded.ctime || got.mtime != chmodded.mtime || got.ctime != chmodded.ctime {
		t.Errorf("read after a chmod: %+v -> %+v; want only the atime updated, past the ctime", chmodded, got)
	}

	// It lasts: the unmount writes it to the store (FlushAtimes, one
	// transaction for every file read), and until then stat shows it.
	ino := chain.Ino(statT(t, name).Ino)
	if in, err := m.store.Names().Inode(ino); err != nil || in.Atime >= statTimes(t, name).atime {
		t.Errorf("the read's atime was written at once (%v): one synced transaction per file read", err)
	}
	if err := m.fsys.FlushAtimes(); err != nil {
		t.Fatal(err)
	}
	in, err := m.store.Names().Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	if got := statTimes(t, name); in.Atime != got.atime {
		t.Errorf("stored atime %d, stat shows %d", in.Atime, got.atime)
	}
}

// TestAtimeModes: noatime never updates the atime; strictatime updates it
// at every read, page cache or not.
func TestAtimeModes(t *testing.T) {
	m := newTestMount(t)
	name := m.path("f")
	writePieces(t, name, []byte("content"))
	m.fsys.Drain()

	m.fsys.SetAtimeMode(Noatime)
	before := statTimes(t, name)
	tick()
	readAll(t, name)
	if got := statTimes(t, name); got != before {
		t.Errorf("noatime: a read changed %+v to %+v", before, got)
	}

	m.fsys.SetAtimeMode(Strictatime)
	for i := 0; i < 3; i++ {
		tick()
		readAll(t, name)
		got := statTimes(t, name)
		if got.atime <= before.atime || got.mtime != before.mtime || got.ctime != before.ctime {
			t.Errorf("strictatime, read %d: %+v -> %+v; want only the atime updated", i, before, got)
		}
		before = got
	}
}

// TestAtimeDue: Linux's relatime rule, and the other modes.
func TestAtimeDue(t *testing.T) {
	const day = int64(24 * time.Hour)
	now := time.Now().UnixNano()
	for _, c := range []struct {
		what       string
		mode       AtimeMode
		at, mt, ct int64
		want       bool
	}{
		{"atime older than mtime", Relatime, now - 10, now - 5, now - 20, true},
		{"atime older than ctime", Relatime, now - 10, now - 20, now - 5, true},
		{"atime equal to mtime", Relatime, now - 10, now - 10, now - 20, true},
		{"atime fresh", Relatime, now - 10, now - 20, now - 20, false},
		{"atime a day old", Relatime, now - day, now - 2*day, now - 2*day, true},
		{"atime under a day old", Relatime, now - day + 1, now - 2*day, now - 2*day, false},
		{"noatime", Noatime, now - 2*day, now, now, false},
		{"strictatime", Strictatime, now - 10, now - 20, now - 20, true},
		{"strictatime, atime now", Strictatime, now, now - 20, now - 20, false},
	} {
		if got := atimeDue(c.mode, c.at, c.mt, c.ct, now); got != c.want {
			t.Errorf("%s: atimeDue %v, want %v", c.what, got, c.want)
		}
	}
}

package fs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// smallDevice is a 64 MiB simulated SSD, as chain's tests use: room for
// the tests' files, quick to open.
// requireDeps fails the test if CKPTFS_REQUIRE_DEPS=1 (make test sets it),
// and otherwise skips it, loudly, saying what is missing.
func requireDeps(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
		t.Fatalf("MISSING DEPENDENCY: %s is unavailable (%v), and CKPTFS_REQUIRE_DEPS=1", what, err)
	}
	msg := fmt.Sprintf("SKIPPED: %s is unavailable (%v); set CKPTFS_REQUIRE_DEPS=1 to fail instead", what, err)
	fmt.Fprintln(os.Stderr, msg)
	t.Skip(msg)
}

// needFuse skips (or fails, see requireDeps) where no FUSE mount can be
// made: no /dev/fuse, or neither root nor fusermount3.
func needFuse(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		requireDeps(t, "/dev/fuse", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			requireDeps(t, "fusermount3 (mounts by non-root)", err)
		}
	}
}

// testMount is a store mounted in the test process.
type testMount struct {
	t        testing.TB
	dir      string // the mount point
	storeDir string
	memory   bool // device content in memory (else device.img in storeDir)
	backend  bool // the in-memory storage backend, no simulated SSD
	// daemonWritten: the daemon writes staging files even where the
	// kernel could serve them (MountOptions.NoPassthrough).
	daemonWritten bool
	// noReadCopies, readCopyMin: FS.NoReadCopies and FS.ReadCopyMin.
	noReadCopies bool
	readCopyMin  int64
	setup        func(*FS) // if set, changes the filesystem before it is mounted
	ds           *storedir.Dir
	store        *chain.Store // ds.Store, or the store on the memory backend
	closeDB      func() error
	fsys         *FS
	server       *fuse.Server
	wrap         func(Namespace) Namespace // what the filesystem serves, around the store's namespace
}

// newTestMount mounts a fresh throw-away store on the in-memory storage
// backend (no simulated SSD, no wear accounts: the filesystem needs neither);
// it is unmounted, checked and closed when the test ends. Tests that need
// the report (.ckptfs/stats.json) or a remount use mountStore.
func newTestMount(t testing.TB) *testMount {
	t.Helper()
	return newTestMountOn(t, nil)
}

// newTestMountOn is newTestMount on the given backend (nil: a fresh
// memstore of 48 MiB).
func newTestMountOn(t testing.TB, backend storage.Backend) *testMount {
	t.Helper()
	return newTestMountMode(t, backend, false)
}

// newTestMountMode is newTestMountOn, with staging files written by the
// daemon if daemonWritten.
func newTestMountMode(t testing.TB, backend storage.Backend, daemonWritten bool) *testMount {
	t.Helper()
	return newTestMountWrapped(t, backend, daemonWritten, nil)
}

// newTestMountWrapped is newTestMountMode with the filesystem serving
// wrap(the store's namespace) (nil: the namespace itself).
func newTestMountWrapped(t testing.TB, backend storage.Backend, daemonWritten bool, wrap func(Namespace) Namespace) *testMount {
	t.Helper()
	needFuse(t)
	m := &testMount{t: t, dir: filepath.Join(t.TempDir(), "mnt"), backend: true, daemonWritten: daemonWritten, wrap: wrap}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := meta.Open(filepath.Join(t.TempDir(), medium.MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if backend == nil {
		// 48 MiB of 4 KiB blocks: room for the tests' files, small enough to fill.
		backend = memstore.New(4096, 12<<10)
	}
	store, err := chain.NewStore(db, backend, nil, chain.Options{Policy: policy.Default(), CacheBytes: 8 << 20})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	m.store, m.closeDB = store, func() error { store.Close(); return db.Close() }
	m.serve(MountOptions{})
	return m
}

// mountStore opens (or creates) the store in storeDir and mounts it on a
// fresh directory, with the mount options of the ckptfs command (Mount).
func mountStore(t testing.TB, storeDir string, memory bool) *testMount {
	t.Helper()
	return mountStoreOpts(t, storeDir, memory, MountOptions{})
}

// mountStoreWith mounts a fresh throw-away store; with allowOther other
// users may enter it, and the directories above the mount point are opened
// to them.
func mountStoreWith(t testing.TB, allowOther bool) *testMount {
	t.Helper()
	m := mountStoreOpts(t, filepath.Join(t.TempDir(), "store"), true, MountOptions{AllowOther: allowOther})
	if allowOther {
		for d := filepath.Dir(m.dir); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

func mountStoreOpts(t testing.TB, storeDir string, memory bool, opts MountOptions) *testMount {
	t.Helper()
	return mountStoreSet(t, storeDir, memory, opts, nil)
}

// mountStoreSet is mountStoreOpts with set applied to the test mount
// before it is served.
func mountStoreSet(t testing.TB, storeDir string, memory bool, opts MountOptions, set func(*testMount)) *testMount {
	t.Helper()
	needFuse(t)
	m := &testMount{t: t, dir: filepath.Join(t.TempDir(), "mnt"), storeDir: storeDir, memory: memory}
	if set != nil {
		set(m)
	}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ds, err := storedir.Open(storeDir, storedir.Options{
		Options: chain.Options{Policy: policy.Default(), CacheBytes: 8 << 20},
		Media:   medium.Options{Device: nandsim.SmallConfig(), NoSync: true, MemoryDevice: memory},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.ds, m.store, m.closeDB = ds, ds.Store, ds.Close
	m.serve(opts)
	return m
}

// serve mounts m.store on m.dir; the report is served when the store is a
// store directory's.
func (m *testMount) serve(opts MountOptions) {
	m.t.Helper()
	opts.NoPassthrough = opts.NoPassthrough || m.daemonWritten
	var names Namespace = m.store.Names()
	if m.wrap != nil {
		names = m.wrap(names)
	}
	m.fsys = New(names, m.store)
	m.fsys.NoReadCopies, m.fsys.ReadCopyMin = m.noReadCopies, m.readCopyMin
	if m.setup != nil {
		m.setup(m.fsys)
	}
	if ds := m.ds; ds != nil {
		m.fsys.Staging = ds.Staging
		m.fsys.Stats = func() ([]byte, error) {
			rep, err := ds.Report(storedir.ReportOptions{})
			if err != nil {
				return nil, err
			}
			return json.Marshal(rep)
		}
	}
	var err error
	m.server, err = Mount(m.dir, m.fsys, opts)
	if err != nil {
		m.closeDB()
		m.store = nil
		requireDeps(m.t, "a FUSE mount", err)
	}
	m.t.Cleanup(m.stop)
}

// path names a file below the mount point.
func (m *testMount) path(name ...string) string {
	return filepath.Join(append([]string{m.dir}, name...)...)
}

// stop unmounts, checks the store (fsck, deep) and closes it; it does
// nothing the second time.
func (m *testMount) stop() {
	m.t.Helper()
	if m.server != nil {
		var err error
		for i := 0; i < 3; i++ { // Unmount itself retries for 0.3 s
			if err = m.server.Unmount(); err == nil {
				break
			}
		}
		if err != nil {
			m.t.Errorf("unmount %s (a file left open?): %v; detaching it", m.dir, err)
			_ = unix.Unmount(m.dir, unix.MNT_DETACH)
			return // the store may still be in use: leave it open
		}
		m.server.Wait()
		m.fsys.Drain()
		m.fsys.Shutdown() // as the mount command does: kept copies go
		m.server = nil
	}
	if m.store == nil {
		return
	}
	rep, err := m.store.Check(true)
	if err != nil {
		m.t.Errorf("fsck: %v", err)
	} else {
		for _, p := range rep.Problems {
			m.t.Errorf("fsck: %v", p)
		}
	}
	if err := m.closeDB(); err != nil {
		m.t.Errorf("close store: %v", err)
	}
	m.store, m.ds = nil, nil
}

// remount stops the mount and mounts the same store directory again.
func (m *testMount) remount() *testMount {
	m.t.Helper()
	m.stop()
	return mountStore(m.t, m.storeDir, m.memory)
}

// wantErrno fails the test unless err wraps want.
func wantErrno(t testing.TB, what string, err error, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}

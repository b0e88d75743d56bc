package fs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"golang.org/x/sys/unix"
)

// Regression tests for findings of an adversarial pass over the mount;
// each failed before its fix.

// TestPosixACLsRefused: POSIX ACL attributes are refused with EOPNOTSUPP
// (they were stored and not enforced), so cp -a and cp -p fall back to
// chmod and keep the modes (they arrived as 700/600).
func TestPosixACLsRefused(t *testing.T) {
	m := newTestMount(t)
	writePieces(t, m.path("f"), []byte("x"))
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The xattr form of an ACL granting u::rw-,g::r--,o::r--.
	acl := []byte{2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff}
	for name, path := range map[string]string{"system.posix_acl_access": m.path("f"), "system.posix_acl_default": m.path("d")} {
		err := unix.Setxattr(path, name, acl, 0)
		wantErrno(t, "setxattr "+name, err, syscall.EOPNOTSUPP)
		_, err = unix.Getxattr(path, name, make([]byte, 64))
		wantErrno(t, "getxattr "+name, err, syscall.EOPNOTSUPP)
	}
	src := t.TempDir()
	for name, mode := range map[string]os.FileMode{"a": 0o755, "b": 0o644, "c": 0o640, "d": 0o751} {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, flag := range []string{"-a", "-p"} {
		dst := m.path("copy" + flag)
		if out, err := exec.Command("cp", "-r", flag, src, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", flag, err, out)
		}
		for name, want := range map[string]os.FileMode{"a": 0o755, "b": 0o644, "c": 0o640, "d": 0o751} {
			fi, err := os.Stat(filepath.Join(dst, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("cp %s: %s has mode %o, want %o", flag, name, fi.Mode().Perm(), want)
			}
		}
	}
}

// TestSetgidDirectory: in a set-group-ID directory a new file takes the
// directory's group and a new subdirectory keeps the bit, as on any
// POSIX filesystem (they took the creator's group, and the bit was lost).
func TestSetgidDirectory(t *testing.T) {
	m := newTestMount(t)
	team := m.path("team")
	if err := os.Mkdir(team, 0o770); err != nil {
		t.Fatal(err)
	}
	const gid = 4242
	if err := os.Chown(team, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(team, 0o2770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	writePieces(t, filepath.Join(team, "file"), []byte("x"))
	if err := os.Mkdir(filepath.Join(team, "sub"), 0o770); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(team, unix.O_TMPFILE|unix.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	var tmp unix.Stat_t
	err = unix.Fstat(fd, &tmp)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	if tmp.Gid != gid {
		t.Errorf("O_TMPFILE file in a setgid directory has group %d, want %d", tmp.Gid, gid)
	}
	f, d := statT(t, filepath.Join(team, "file")), statT(t, filepath.Join(team, "sub"))
	if f.Gid != gid {
		t.Errorf("file in a setgid directory has group %d, want %d", f.Gid, gid)
	}
	if d.Gid != gid || d.Mode&syscall.S_ISGID == 0 {
		t.Errorf("subdirectory of a setgid directory: group %d mode %o, want group %d and the setgid bit", d.Gid, d.Mode, gid)
	}
	plain := m.path("plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(plain, 0, gid); err != nil {
		t.Fatal(err)
	}
	writePieces(t, filepath.Join(plain, "file"), []byte("x"))
	if g := statT(t, filepath.Join(plain, "file")).Gid; g == gid {
		t.Errorf("a directory without the bit passed on its group %d", g)
	}
}

// TestNameTooLongWithoutTheName: a name one byte over NAME_MAX that does
// not exist is ENAMETOOLONG for every call that looks it up, not ENOENT.
func TestNameTooLongWithoutTheName(t *testing.T) {
	m := newTestMount(t)
	writePieces(t, m.path("f"), []byte("x"))
	long := m.path(strings.Repeat("n", 256))
	for _, c := range []struct {
		what string
		err  error
	}{
		{"chmod", syscall.Chmod(long, 0o644)},
		{"chown", syscall.Chown(long, 0, 0)},
		{"lchown", syscall.Lchown(long, 0, 0)},
		{"truncate", syscall.Truncate(long, 0)},
		{"link to it", syscall.Link(m.path("f"), long)},
		{"link from it", syscall.Link(long, m.path("g"))},
		{"rename from it", syscall.Rename(long, m.path("g"))},
		{"rmdir", syscall.Rmdir(long)},
		{"unlink", syscall.Unlink(long)},
		{"stat", func() error { _, err := os.Stat(long); return err }()},
	} {
		wantErrno(t, c.what, c.err, syscall.ENAMETOOLONG)
	}
}

// TestLinkTouchesDirectory: link(2) updates the directory's ctime and
// mtime, as creating any other entry does.
func TestLinkTouchesDirectory(t *testing.T) {
	m := newTestMount(t)
	dir := m.path("d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writePieces(t, m.path("f"), []byte("x"))
	before := statT(t, dir)
	time.Sleep(20 * time.Millisecond)
	if err := os.Link(m.path("f"), filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	after := statT(t, dir)
	if after.Mtim == before.Mtim || after.Ctim == before.Ctim {
		t.Errorf("link left the directory's mtime %v and ctime %v as they were", after.Mtim, after.Ctim)
	}
}

// TestControlFileAttributes: .ckptfs/stats.json stats with the size a read
// returns, one link and the time it was rendered (it showed size 0, nlink
// 0, 1970, so tar archived it empty); its directory lists . and ..; it
// belongs to the mount's owner with mode 0400, so that other users of an
// --allow-other mount cannot read every file's path from it.
func TestControlFileAttributes(t *testing.T) {
	m := mountStoreWith(t, true)
	writePieces(t, m.path("secret-name"), []byte("x"))
	stats := m.path(controlDir, "stats.json")
	st := statT(t, stats)
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("stats.json is not JSON: %.200s", b)
	}
	if st.Size == 0 || st.Nlink != 1 || time.Since(time.Unix(st.Mtim.Unix())) > time.Hour {
		t.Errorf("stats.json: size %d nlink %d mtime %v; want the report's size, 1 link, a recent time", st.Size, st.Nlink, time.Unix(st.Mtim.Unix()))
	}
	// Rendered twice, the report's size may differ by a few digits.
	if d := st.Size - int64(len(b)); d < -64 || d > 64 {
		t.Errorf("stats.json stats %d bytes, reads %d", st.Size, len(b))
	}
	if st.Mode&0o777 != 0o400 || st.Uid != uint32(os.Getuid()) {
		t.Errorf("stats.json: mode %o uid %d, want 0400 owned by the mount's owner %d", st.Mode&0o777, st.Uid, os.Getuid())
	}
	if out, err := exec.Command("ls", "-a", m.path(controlDir)).Output(); err != nil || strings.Join(strings.Fields(string(out)), ",") != ".,..,drop_caches,stats.json,view" {
		t.Errorf("ls -a %s: %q (%v), want ., .., drop_caches, stats.json and view", controlDir, out, err)
	}
	cat := exec.Command("cat", stats)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cat.CombinedOutput(); err == nil || strings.Contains(string(out), "secret-name") {
		t.Errorf("another user read stats.json (err %v): %.200s", err, out)
	}
	// The same user can read the files it may: the mount lets others in.
	other := exec.Command("ls", m.dir)
	other.SysProcAttr = cat.SysProcAttr
	if out, err := other.CombinedOutput(); err != nil || !strings.Contains(string(out), "secret-name") {
		t.Errorf("another user could not list the mount (allow_other): %v %s", err, out)
	}
}

// fillDevice writes files of random bytes until one does not fit, then
// smaller ones, down to less than a page free. A file committing in the
// background holds the space its writes reserved until its commit lands,
// which may need less: so it waits for the commits (fsync of the root) and
// fills again, until a pass writes nothing.
func fillDevice(t *testing.T, m *testMount) {
	t.Helper()
	for i := 0; ; {
		wrote := false
		for size := 1 << 20; size >= 4096; i++ {
			err := os.WriteFile(m.path(fmt.Sprintf("filler-%d", i)), randomBytes(int64(100+i), size), 0o644)
			if errors.Is(err, syscall.ENOSPC) {
				size /= 4
			} else if err != nil {
				t.Fatal(err)
			} else {
				wrote = true
			}
		}
		root, err := os.Open(m.dir)
		if err != nil {
			t.Fatal(err)
		}
		err = root.Sync()
		root.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !wrote {
			return
		}
	}
}

// TestCloseFailsWhenFull: on a full simulated device a write that grows the
// file fails with ENOSPC (spaceLow); one accepted into the staging file
// fails at close: with space tight, close commits before it returns
// (spaceTight), reports ENOSPC, and the file keeps its previous content.
func TestCloseFailsWhenFull(t *testing.T) {
	m := newTestMount(t)
	fillDevice(t, m)
	f, err := os.Create(m.path("small"))
	if err != nil {
		t.Fatal(err)
	}
	// The write fails already (spaceLow), or else the close does.
	if _, err = f.Write(randomBytes(7, 64<<10)); err != nil {
		wantErrno(t, "write on a full device", err, syscall.ENOSPC)
		f.Close()
	} else {
		wantErrno(t, "close on a full device", f.Close(), syscall.ENOSPC)
	}
	m.fsys.Drain()
	// The kernel drops its cached size of the rejected save (a notification
	// sent after close returned).
	for deadline := time.Now().Add(2 * time.Second); statT(t, m.path("small")).Size != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	wantSize(t, m.path("small"), 0)
	// Space given back is usable again. An unlinked inode keeps its content
	// until the kernel forgets it (it may still open it), and the kernel
	// sends that FORGET after the unlink's reply, queued behind other
	// requests: the next write may come first (1 run in 10 here), so the
	// space has a moment to come back.
	if err := os.Remove(m.path("filler-0")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := os.WriteFile(m.path("small"), []byte("x\n"), 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			t.Fatalf("write after freeing space: %v", err)
		}
	}
	wantContent(t, m.path("small"), []byte("x\n"))
}

// fullAtCommit is a backend that runs out of space on demand: writes are
// accepted (their space is reserved from what Space reports) and the
// commit's pack writes then fail, as when another writer took the space.
type fullAtCommit struct {
	storage.Backend
	full atomic.Bool
}

func (b *fullAtCommit) Write(data []byte) (storage.Location, error) {
	if b.full.Load() {
		return nil, fmt.Errorf("test: device full: %w", chain.ErrNoSpace)
	}
	return b.Backend.Write(data)
}

// TestFailedCommitKeepsOldContent: an in-place write whose commit fails
// (the device full at commit) reports ENOSPC at fsync and leaves the previous content,
// and a later read-only open sees that content, not the rejected bytes
// left in the kernel's page cache (it did, in some runs).
func TestFailedCommitKeepsOldContent(t *testing.T) {
	backend := &fullAtCommit{Backend: memstore.New(4096, 12<<10)}
	m := newTestMountOn(t, backend)
	old := randomBytes(21, 8<<20)
	writePieces(t, m.path("a"), old)
	m.fsys.Drain() // its commit, in the background after close, has landed
	backend.full.Store(true)
	for round := range 3 {
		w, err := os.OpenFile(m.path("a"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		cached := make([]byte, 1<<20)
		if _, err := w.ReadAt(cached, 0); err != nil { // pages into the cache
			w.Close()
			t.Fatal(err)
		}
		if _, err := w.WriteAt(bytes.Repeat([]byte{'X'}, 64<<10), 4096); err != nil {
			w.Close()
			t.Fatal(err)
		}
		err = w.Sync()
		wantErrno(t, "fsync after an in-place write to a full device", err, syscall.ENOSPC)
		w.Close()
		m.fsys.Drain() // the commit tried again after the last close fails too
		got, err := os.ReadFile(m.path("a"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, old) {
			t.Fatalf("round %d: after the failed commit a read-only open sees other bytes than the committed ones", round)
		}
	}
}

// TestHugeSizesRefused: a truncate or write past the largest file the store
// keeps fails with EFBIG at once (pjdfstest's truncate/12.t and
// ftruncate/12.t hung the daemon: the commit copied a petabyte of zeros).
func TestHugeSizesRefused(t *testing.T) {
	m := newTestMount(t)
	writePieces(t, m.path("f"), []byte("x"))
	start := time.Now()
	wantErrno(t, "truncate to 999999999999999", syscall.Truncate(m.path("f"), 999999999999999), syscall.EFBIG)
	f, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantErrno(t, "ftruncate past the limit", f.Truncate(1<<44+1), syscall.EFBIG)
	_, err = f.WriteAt([]byte("y"), 1<<44)
	wantErrno(t, "write past the limit", err, syscall.EFBIG)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusing huge sizes took %v", d)
	}
	wantContent(t, m.path("f"), []byte("x"))
}

// TestSparseFilesCostNothing: `truncate -s 64G` of a new file, and of a file
// with content, returns at once and stores nothing for the hole (the commit
// encoded every zero, for minutes, while ls and stat of the file hung);
// the file reads back its content, then zeros.
func TestSparseFilesCostNothing(t *testing.T) {
	m := newTestMount(t)
	const size = 64 << 30
	writePieces(t, m.path("kept"), []byte("content"))
	for _, name := range []string{"new", "kept"} {
		p := m.path(name)
		if name == "new" {
			writePieces(t, p, nil)
		}
		if err := syscall.Truncate(p, size); err != nil {
			t.Fatalf("truncate %s: %v", name, err)
		}
		wantSize(t, p, size)
		// The truncate may have gone to the writer of the handle whose
		// release is still on its way from the kernel: fsync commits it.
		if f, err := os.Open(p); err != nil || f.Sync() != nil || f.Close() != nil {
			t.Fatalf("fsync %s: %v", name, err)
		}
		if stored := xattr(t, p, "stored_bytes"); stored != "0" && name == "new" {
			t.Errorf("%s: a 64 GiB hole stored %s bytes", name, stored)
		}
		if stored, _ := strconv.Atoi(xattr(t, p, "stored_bytes")); stored > 1<<20 {
			t.Errorf("%s: a 64 GiB hole stored %d bytes", name, stored)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4096)
		if _, err := f.ReadAt(got, size-4096); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
			t.Errorf("%s: the end of the hole is not zeros (%v)", name, err)
		}
		if name == "kept" {
			if _, err := f.ReadAt(got[:7], 0); err != nil || string(got[:7]) != "content" {
				t.Errorf("the content before the hole: %q, %v", got[:7], err)
			}
		}
		// lseek finds the hole, so cp --sparse skips it.
		fd := int(f.Fd())
		hole, err := unix.Seek(fd, 0, unix.SEEK_HOLE)
		switch {
		case err != nil:
			t.Errorf("%s: SEEK_HOLE: %v", name, err)
		case name == "new" && hole != 0, name == "kept" && (hole == 0 || hole > 1<<20):
			t.Errorf("%s: SEEK_HOLE from 0 found %d", name, hole)
		}
		if _, err := unix.Seek(fd, hole, unix.SEEK_DATA); err != syscall.ENXIO {
			t.Errorf("%s: SEEK_DATA from %d: %v, want ENXIO (nothing but the hole after it)", name, hole, err)
		}
		f.Close()
	}
}

// TestWriteByOtherUserClearsSetuid: the mount clears setuid bits itself
// (HANDLE_KILLPRIV_V2, so that the kernel does not ask for
// security.capability before every write): a user other than root opening
// a setuid, setgid group-executable file for writing clears both bits.
func TestWriteByOtherUserClearsSetuid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write as another user")
	}
	m := mountStoreWith(t, true)
	name := m.path("prog")
	if err := os.WriteFile(name, []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o777|os.ModeSetuid|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo more >> "+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("write as another user: %v %s", err, out)
	}
	st := statT(t, name)
	if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		t.Errorf("mode %o after a write by another user: setuid/setgid kept", st.Mode)
	}
	wantContent(t, name, []byte("#!/bin/sh\nmore\n"))
}

package fs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Regression tests for fallocate(2) on a mount (xfstests generic/213, 568,
// 683 and 684); each failed before its fix.

// statfsFree is the free space df shows for the mount, in bytes.
func statfsFree(t *testing.T, m *testMount) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(m.dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fstatT is fstat of an open file.
func fstatT(t *testing.T, f *os.File) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFallocateReservesSpace (generic/213, 568): fallocate reserves space
// on the device. One asking for more than df shows free fails with ENOSPC
// and changes nothing (it succeeded: only the staging file on the host was
// allocated); one that fits shows at once in st_blocks and in df, writing
// into its range grows neither (the written blocks were counted when the
// file was written instead), and the commit gives back what it did not
// use. Fallocate keeps passthrough on (it turned it off for the mount).
func TestFallocateReservesSpace(t *testing.T) {
	t.Run("passthrough", func(t *testing.T) { testFallocateReservesSpace(t, false) })
	t.Run("daemon-written", func(t *testing.T) { testFallocateReservesSpace(t, true) })
}

func testFallocateReservesSpace(t *testing.T, daemonWritten bool) {
	m := newTestMountMode(t, nil, daemonWritten)
	passthrough := m.fsys.PassthroughOn()
	writePieces(t, m.path("f"), []byte("content"))
	m.fsys.Drain()
	before := statfsFree(t, m)

	f, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	blocks0 := fstatT(t, f).Blocks
	for _, mode := range []uint32{0, unix.FALLOC_FL_KEEP_SIZE} {
		err := unix.Fallocate(fd, mode, 0, before+1<<20)
		wantErrno(t, fmt.Sprintf("fallocate (mode %d) of %d bytes with %d free", mode, before+1<<20, before), err, syscall.ENOSPC)
	}
	if st := fstatT(t, f); st.Size != 7 || st.Blocks != blocks0 {
		t.Errorf("after the failed fallocates: size %d, %d blocks; want 7, %d", st.Size, st.Blocks, blocks0)
	}
	if free := statfsFree(t, m); free != before {
		t.Errorf("after the failed fallocates df shows %d free, want %d", free, before)
	}

	// One that fits: counted at once in st_blocks and in df.
	half := before / 2 &^ (1<<20 - 1)
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, half); err != nil {
		t.Fatalf("fallocate of %d bytes with %d free: %v", half, before, err)
	}
	st := fstatT(t, f)
	if st.Size != 7 || st.Blocks*512 < half {
		t.Errorf("after fallocate of %d bytes: size %d, %d blocks (%d bytes); want 7 and at least %d bytes",
			half, st.Size, st.Blocks, st.Blocks*512, half)
	}
	if free := statfsFree(t, m); free > before-half+4096 { // its first page held the content
		t.Errorf("after fallocate of %d bytes df shows %d free of %d", half, free, before)
	}
	// What it reserved is no longer there for another file.
	g, err := os.Create(m.path("g"))
	if err != nil {
		t.Fatal(err)
	}
	left := statfsFree(t, m)
	wantErrno(t, "fallocate of what df shows free and a page", unix.Fallocate(int(g.Fd()), 0, 0, left+4096), syscall.ENOSPC)
	if st := fstatT(t, g); st.Size != 0 {
		t.Errorf("new file after a failed fallocate: size %d", st.Size)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	// Writing into the range grows neither st_blocks nor what df shows used.
	data := randomBytes(3, 1<<20)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if after := fstatT(t, f).Blocks; after > st.Blocks {
		t.Errorf("writing 1 MiB into the fallocated range grew st_blocks from %d to %d", st.Blocks, after)
	}
	if free := statfsFree(t, m); free < left {
		t.Errorf("writing into the fallocated range took space: df shows %d free, %d before", free, left)
	}
	if !daemonWritten && passthrough && !m.fsys.PassthroughOn() {
		t.Error("fallocate turned passthrough off")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	wantContent(t, m.path("f"), data)
	// The commit used what the file holds (1 MiB of random bytes), and gave
	// the rest back.
	if free := statfsFree(t, m); free < before-2<<20 {
		t.Errorf("after the commit df shows %d free, %d before the fallocate", free, before)
	}

	// A file unlinked while open gives its reservation back when it goes.
	h, err := os.Create(m.path("h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(h.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, half); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("h")); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	base := statfsFree(t, m)
	for deadline := time.Now().Add(5 * time.Second); base < before-2<<20; base = statfsFree(t, m) {
		if time.Now().After(deadline) { // the kernel forgets the inode after the unlink's reply
			t.Fatalf("a deleted file's reservation stays: df shows %d free, %d before", base, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFallocatedBlocksCountedWhileWritten (generic/568): a file's blocks
// include what fallocate allocated beyond its end, so writing there later
// does not grow them; and a fallocate of 2 bytes across a block boundary
// counts both blocks.
func TestFallocatedBlocksCountedWhileWritten(t *testing.T) {
	m := newTestMount(t)
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, 0, 4095, 2); err != nil {
		t.Fatal(err)
	}
	if st := fstatT(t, f); st.Size != 4097 || st.Blocks*512 < 8192 {
		t.Errorf("fallocate of 2 bytes at 4095: size %d, %d blocks; want 4097 and 2 pages", st.Size, st.Blocks)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	st := fstatT(t, f)
	if st.Blocks < 1<<20/512 {
		t.Errorf("after fallocate of 1 MiB beyond the end: %d blocks, want at least %d", st.Blocks, 1<<20/512)
	}
	for _, off := range []int64{4095, 1<<20 - 2} {
		if _, err := f.WriteAt([]byte("xy"), off); err != nil {
			t.Fatal(err)
		}
		if after := fstatT(t, f).Blocks; after != st.Blocks {
			t.Errorf("a write at %d into the fallocated range: %d blocks, %d before", off, after, st.Blocks)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1<<20)
	copy(want[4095:], "xy")
	copy(want[1<<20-2:], "xy")
	wantContent(t, m.path("f"), want)
}

// TestFallocateByOtherUserClearsSetgid (generic/683, 684): fallocate and
// punching a hole by a user other than root clear the setuid bit, and the
// setgid bit of a group-executable file or of a file whose group the user
// is not in, as the kernel does for a write; root's keep both. The kernel
// leaves this to a FUSE daemon that handles killing privileges: the open
// for writing cleared setuid, but setgid stayed on a file that is not
// group-executable; and a mode changed at fallocate must reach the kernel,
// which answers a stat of the mode alone from its cache.
func TestFallocateByOtherUserClearsSetgid(t *testing.T) { // and a write
	if os.Geteuid() != 0 {
		t.Skip("needs root to fallocate as another user")
	}
	fallocate, err := exec.LookPath("fallocate")
	if err != nil {
		requireDeps(t, "fallocate(1) (util-linux)", err)
	}
	m := mountStoreWith(t, true)
	user := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	inGroup := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{4242}}
	cases := []struct {
		mode, want uint32
		gid        uint32 // the file's group
		who        *syscall.Credential
	}{
		{0o6666, 0o666, 0, user},
		{0o6676, 0o676, 0, user},
		{0o6766, 0o766, 0, user},
		{0o6777, 0o777, 0, user},
		{0o6666, 0o6666, 0, nil}, // root
		{0o6676, 0o6676, 0, nil},
		{0o6766, 0o6766, 0, nil},
		{0o6777, 0o6777, 0, nil},
		{0o2676, 0o676, 0, user},
		{0o2777, 0o777, 0, user},
		// A user in the file's group keeps setgid on a file that is not
		// group-executable: as its own group, and as a supplementary one.
		{0o2666, 0o2666, 65534, user},
		{0o6666, 0o2666, 4242, inGroup},
		{0o2676, 0o676, 65534, user},
	}
	name := m.path("a")
	content := bytes.Repeat([]byte{0x58}, 192<<10)
	// An append by the same user clears the same bits: the open for
	// writing applies the rule a write does (killPrivileges).
	for _, op := range [][]string{{}, {"--punch-hole"}, {"append"}} {
		for _, c := range cases {
			if err := os.WriteFile(name, content, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(name, 0, int(c.gid)); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Chmod(name, c.mode); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(fallocate, append(op, "-o", "65536", "-l", "65536", name)...)
			if len(op) == 1 && op[0] == "append" {
				cmd = exec.Command("/bin/sh", "-c", `printf x >> "$1"`, "sh", name)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.who}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("fallocate %v as %v: %v %s", op, c.who, err, out)
			}
			who := "root"
			if c.who != nil {
				who = fmt.Sprintf("uid %d groups %d %v", c.who.Uid, c.who.Gid, c.who.Groups)
			}
			// As stat -c %a asks: for the mode alone, which the kernel
			// answers from its cache unless told it changed.
			var stx unix.Statx_t
			if err := unix.Statx(unix.AT_FDCWD, name, 0, unix.STATX_MODE, &stx); err != nil {
				t.Fatal(err)
			}
			if got := uint32(stx.Mode) & 0o7777; got != c.want {
				t.Errorf("fallocate %v by %s of a file %o of group %d: mode %o, want %o", op, who, c.mode, c.gid, got, c.want)
			}
			if err := os.Remove(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

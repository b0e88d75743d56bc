package fs

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChownClearsSetid: a chown clears setuid, and setgid where the group
// may execute, of every kind of file but a directory, root's chown too, as
// on ext4 (pjdfstest chown/00.t, fstests generic/193).
func TestChownClearsSetid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown as another user")
	}
	chgrp, err := exec.LookPath("chgrp")
	if err != nil {
		requireDeps(t, "chgrp (coreutils)", err)
	}
	m := mountStoreWith(t, true)
	owner := &syscall.Credential{Uid: 65534, Gid: 65533, Groups: []uint32{65532}}
	cases := []struct {
		name       string
		mkfifo     bool
		dir        bool
		mode, want uint32
		who        *syscall.Credential
	}{
		{name: "file", mode: 0o6555, want: 0o555, who: owner},
		{name: "file-no-group-exec", mode: 0o6545, want: 0o2545, who: owner},
		{name: "fifo", mkfifo: true, mode: 0o6555, want: 0o555, who: owner},
		{name: "dir", dir: true, mode: 0o6555, want: 0o6555, who: owner},
		{name: "by-root", mode: 0o6555, want: 0o555},
		{name: "by-root-no-group-exec", mode: 0o6545, want: 0o2545},
	}
	for _, c := range cases {
		p := m.path(c.name)
		var err error
		switch {
		case c.dir:
			err = os.Mkdir(p, 0o755)
		case c.mkfifo:
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65533); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(chgrp, "65532", p)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.who}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: chgrp as %v: %v %s", c.name, c.who, err, out)
		}
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MODE|unix.STATX_GID, &stx); err != nil {
			t.Fatal(err)
		}
		if got := uint32(stx.Mode) & 0o7777; got != c.want || stx.Gid != 65532 {
			t.Errorf("%s %o after chgrp: mode %o gid %d, want %o 65532", c.name, c.mode, got, stx.Gid, c.want)
		}
	}
}

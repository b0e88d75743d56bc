package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/fs"
)

func TestIsMountHelper(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/sbin/mount.fuse.ckptfs": true,
		"mount.ckptfs":            true,
		"/usr/bin/ckptfs":         false,
		"mount.fuse":              false,
	} {
		if got := isMountHelper(argv0); got != want {
			t.Errorf("isMountHelper(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// TestParseHelperArgs: the command lines mount(8) runs a helper with.
func TestParseHelperArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want helperCall
		err  string
	}{
		{args: []string{"src", "/mnt", "-o", "rw,store=/s"},
			want: helperCall{source: "src", mountpoint: "/mnt", options: []string{"rw", "store=/s"}}},
		{args: []string{"-n", "-ostore=/s", "src", "/mnt", "-sfv", "-o", "ro", "-t", "fuse.ckptfs"},
			want: helperCall{source: "src", mountpoint: "/mnt", options: []string{"store=/s", "ro"}, fake: true, verbose: true, sloppy: true}},
		{args: []string{"src", "-o", `comment="a,b",x`, "--", "-odd"},
			want: helperCall{source: "src", mountpoint: "-odd", options: []string{"comment=a,b", "x"}}},
		{args: []string{"src", "/mnt", "-t", "ext4"}, err: "-t ext4"},
		{args: []string{"src", "/mnt", "-N", "/proc/1/ns/mnt"}, err: "-N"},
		{args: []string{"src", "/mnt", "-x"}, err: "unknown flag -x"},
		{args: []string{"src", "/mnt", "-o"}, err: "-o needs a value"},
		{args: []string{"/mnt", "-o", "ro"}, err: "usage"},
	} {
		got, err := parseHelperArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseHelperArgs(%q): %v, want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseHelperArgs(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// mountFlagLookup finds ckptfs mount's flags, as setUpMountHelper does.
func mountFlagLookup(t *testing.T) func(string) *pflag.Flag {
	t.Helper()
	root := newRootCommand()
	mountCmd, _, err := root.Find([]string{"mount"})
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) *pflag.Flag {
		if f := mountCmd.Flags().Lookup(name); f != nil {
			return f
		}
		return root.PersistentFlags().Lookup(name)
	}
}

// TestHelperMountArgs: each kind of -o option becomes its flag of ckptfs
// mount, fstab's own are dropped, and what cannot be honoured is refused.
func TestHelperMountArgs(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	flag := mountFlagLookup(t)
	call := func(source string, opts ...string) helperCall {
		return helperCall{source: source, mountpoint: "/mnt", options: opts}
	}
	for _, tc := range []struct {
		name    string
		call    helperCall
		root    bool
		want    []string
		ignored []string
		err     string
	}{
		{name: "fstab line, user",
			call: call("src", "rw", "noatime", "store=/s", "allow_other", "nofail", "_netdev", "defaults", "noauto", "x-systemd.requires=a", "user=bob", "comment=x"),
			want: []string{"mount", "--source=src", "--store=/s", "--options=rw,noatime,allow_other", "--", "/mnt"}},
		{name: "root: dev and suid unless said otherwise, as mount.fuse3",
			call: call("src", "store=/s", "ro"), root: true,
			want: []string{"mount", "--source=src", "--store=/s", "--options=suid,dev,ro", "--", "/mnt"}},
		{name: "root asking nodev,nosuid",
			call: call("src", "store=/s", "nosuid", "nodev", "noexec"), root: true,
			want: []string{"mount", "--source=src", "--store=/s", "--options=nosuid,nodev,noexec", "--", "/mnt"}},
		{name: "ckptfs flags",
			call: call("src", "store=/s", "codec=zstd", "device_size=64MiB", "passthrough=false", "sync_close", "wait=5s", "log-level=info"),
			want: []string{"mount", "--source=src", "--store=/s", "--codec=zstd", "--device-size=64MiB", "--no-passthrough=true", "--sync-close", "--wait=5s", "--log-level=info", "--", "/mnt"}},
		{name: "bare negated flag",
			call: call("src", "store=/s", "passthrough"),
			want: []string{"mount", "--source=src", "--store=/s", "--no-passthrough=false", "--", "/mnt"}},
		{name: "absolute source is the store",
			call: call("/data/store", "noatime"),
			want: []string{"mount", "--source=/data/store", "--store=/data/store", "--options=noatime", "--", "/mnt"}},
		{name: "sloppy", call: helperCall{source: "src", mountpoint: "/mnt", options: []string{"store=/s", "bogus=1"}, sloppy: true},
			want: []string{"mount", "--source=src", "--store=/s", "--", "/mnt"}, ignored: []string{"bogus=1"}},
		{name: "unknown", call: call("src", "store=/s", "bogus"), err: `unknown mount option "bogus"`},
		{name: "store without a value", call: call("src", "store"), err: "store needs a value"},
		{name: "foreground would hang mount(8)", call: call("src", "store=/s", "foreground"), err: "unknown mount option"},
		{name: "internal flag", call: call("src", "store=/s", "ready_fd=3"), err: "unknown mount option"},
		{name: "bad boolean", call: call("src", "store=/s", "passthrough=maybe"), err: "not true or false"},
	} {
		args, ignored, err := helperMountArgs(tc.call, tc.root, flag)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want an error with %q", tc.name, args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(args, tc.want) || !reflect.DeepEqual(ignored, tc.ignored) {
			t.Errorf("%s:\n got %q ignored %q (%v)\nwant %q ignored %q", tc.name, args, ignored, err, tc.want, tc.ignored)
		}
	}
}

// TestHelperNeedsStoreWithoutHome: mount(8) runs helpers without HOME,
// under which the default store lives; that is said, not a bare "no home".
func TestHelperNeedsStoreWithoutHome(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_DATA_HOME", "")
	_, _, err := helperMountArgs(helperCall{source: "src", mountpoint: "/mnt"}, true, mountFlagLookup(t))
	if err == nil || !strings.Contains(err.Error(), "add store=DIR") {
		t.Fatalf("helper without HOME or store=: %v", err)
	}
}

// TestHelperArgsParse: what the helper hands ckptfs mount parses, options
// and all, and -f checks the options without mounting.
func TestHelperArgsParse(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	root := newRootCommand()
	var stderr bytes.Buffer
	done, err := setUpMountHelper(root, []string{"src", "/mnt", "-f", "-o", "store=/s,noatime,cache_mib=64"}, &stderr)
	if err != nil || !done {
		t.Fatalf("-f: done %v, %v", done, err)
	}
	mountCmd, _, _ := root.Find([]string{"mount"})
	if v, _ := mountCmd.Flags().GetInt("cache-mib"); v != 64 {
		t.Errorf("cache_mib=64 parsed as --cache-mib %d", v)
	}
	want := "noatime"
	if os.Geteuid() == 0 {
		want = "suid,dev,noatime"
	}
	if v, _ := mountCmd.Flags().GetString("options"); v != want {
		t.Errorf("--options %q, want %q", v, want)
	}
	_, err = setUpMountHelper(newRootCommand(), []string{"src", "/mnt", "-f", "-o", "store=/s,cache_mib=lots"}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "cache-mib") {
		t.Errorf("-f with a bad value: %v", err)
	}
}

// TestMountOptionFlags: the generic options become mount(2)'s flags over
// nosuid,nodev, in order; dev and suid are root's.
func TestMountOptionFlags(t *testing.T) {
	const def = syscall.MS_NOSUID | syscall.MS_NODEV
	for _, tc := range []struct {
		list  string
		root  bool
		flags uintptr
		allow bool
		err   string
	}{
		{list: "", root: true, flags: def},
		{list: "ro,noatime,noexec", root: true, flags: def | syscall.MS_RDONLY | syscall.MS_NOATIME | syscall.MS_NOEXEC},
		{list: "dev,suid", root: true, flags: 0},
		{list: "ro,rw", root: false, flags: def},
		{list: "noatime,strictatime,relatime", root: true, flags: def | syscall.MS_RELATIME},
		{list: "allow_other,default_permissions,nodiratime", root: false, flags: def | syscall.MS_NODIRATIME, allow: true},
		{list: "dev", root: false, err: `"dev" needs root`},
		{list: "suid", root: false, err: `"suid" needs root`},
		{list: "sync", root: true, err: `unknown mount option "sync"`},
	} {
		var allow bool
		vfs, err := parseMountOptions(tc.list, tc.root, &allow)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("-o %s: %v, want an error with %q", tc.list, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("-o %s: %v", tc.list, err)
			continue
		}
		flags, err := fs.VFSFlags(vfs, tc.root)
		if err != nil || flags != tc.flags || allow != tc.allow {
			t.Errorf("-o %s: flags %#x allow_other %v (%v), want %#x %v", tc.list, flags, allow, err, tc.flags, tc.allow)
		}
	}
}

// TestDaemonArgs: the daemon gets the flags the mount was given, however
// they came, and its command line says its store and mount point (what
// the wait for a previous daemon reads).
func TestDaemonArgs(t *testing.T) {
	root := newRootCommand()
	mountCmd, rest, err := root.Find([]string{"mount", "--log-level=info", "-o", "noatime", "--codec", "zstd", "--store", "rel", "mnt"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mountCmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	args := daemonArgs(mountCmd.Flags(), "/abs/mnt", "/abs/store")
	want := []string{"mount", "--codec=zstd", "--log-level=info", "--options=noatime", "--foreground", "--ready-fd=3", "--store=/abs/store", "--", "/abs/mnt"}
	if !reflect.DeepEqual(args, want) {
		t.Fatalf("daemon args %q, want %q", args, want)
	}
	store, mp, ok := mountCommandLine(append([]string{"/usr/bin/ckptfs"}, args...))
	if !ok || store != "/abs/store" || mp != "/abs/mnt" {
		t.Fatalf("daemon's command line read as store %q mount point %q (%v)", store, mp, ok)
	}
	for _, argv := range [][]string{
		{"ckptfs", "fsck", "--store", "/abs/store"},
		{"ckptfs", "mount", "mnt"}, // default store: not known here
		{"ckptfs"},
		{"python3", "x.py"},
	} {
		if _, _, ok := mountCommandLine(argv); ok {
			t.Errorf("%q read as a mount of a store", argv)
		}
	}
}

func TestFlockHolders(t *testing.T) {
	locks := `1: FLOCK  ADVISORY  WRITE 15733 fe:00:10788931 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 fe:00:10788931 0 EOF
2: POSIX  ADVISORY  WRITE 17 fe:00:10788931 0 EOF
3: FLOCK  ADVISORY  WRITE 28406 00:2f:10788931 0 EOF
4: FLOCK  ADVISORY  WRITE 15697 fe:00:9986154 0 EOF
`
	if got := flockHolders(locks, 10788931); !reflect.DeepEqual(got, []int{15733, 28406}) {
		t.Fatalf("holders %v, want [15733 28406]", got)
	}
}

func TestCkptfsMountedAt(t *testing.T) {
	info := `27 1 0:30 / / rw,relatime - ext4 /dev/root rw
44 27 0:41 / /tmp/a\040b rw,nosuid,nodev,relatime - fuse.ckptfs /s rw,user_id=0
45 27 0:42 / /tmp/other rw,relatime shared:1 - fuse.sshfs host: rw
`
	for mp, want := range map[string]bool{"/tmp/a b": true, "/tmp/other": false, "/tmp/none": false, "/tmp": false} {
		if got := ckptfsMountedAt(info, mp); got != want {
			t.Errorf("ckptfs mount at %s: %v, want %v", mp, got, want)
		}
	}
	// A mount point given through a symlink is found by its real path.
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	os.Symlink(real, filepath.Join(dir, "link"))
	resolved, _ := filepath.EvalSymlinks(real)
	line := "50 27 0:50 / " + resolved + " rw - fuse.ckptfs s rw\n"
	if !ckptfsMountedAt(line, filepath.Join(dir, "link")) {
		t.Errorf("mount at %s not found through the symlink %s", resolved, filepath.Join(dir, "link"))
	}
}

// TestWaitRefusesOtherHolders: a store held by a process that is not a
// ckptfs mount daemon (here, this test) is refused at once, as before.
func TestWaitRefusesOtherHolders(t *testing.T) {
	store := t.TempDir()
	f, err := os.Create(filepath.Join(store, medium.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, ok := findStoreHolder(store); ok {
		t.Fatal("this test taken for a mount daemon")
	}
	var out bytes.Buffer
	start := time.Now()
	err = waitPreviousDaemon(&out, store, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "in use by another ckptfs daemon") || time.Since(start) > 5*time.Second {
		t.Fatalf("store held by another process: %v after %v", err, time.Since(start))
	}
	if out.Len() != 0 {
		t.Errorf("refused at once, yet said %q", out.String())
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := waitPreviousDaemon(&out, store, time.Minute); err != nil {
		t.Fatalf("free store: %v", err)
	}
}

// TestRemountFlags: a remount's generic options become mount(2) flags;
// ckptfs's own options are the running daemon's and ignored.
func TestRemountFlags(t *testing.T) {
	for _, c := range []struct {
		opts      []string
		set, none uintptr
	}{
		{[]string{"remount", "ro", "store=/s", "codec=zstd"}, syscall.MS_RDONLY, syscall.MS_NODEV | syscall.MS_NOSUID},
		{[]string{"remount", "rw", "nodev", "noatime", "defaults"}, syscall.MS_NODEV | syscall.MS_NOATIME, syscall.MS_RDONLY | syscall.MS_NOSUID},
	} {
		flags, err := remountFlags(helperCall{mountpoint: "/m", options: c.opts})
		if err != nil || flags&c.set != c.set || flags&c.none != 0 {
			t.Errorf("%v: flags %#x, %v; want %#x set, %#x clear", c.opts, flags, err, c.set, c.none)
		}
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/meta"
)

func init() { subcommands = append(subcommands, newMountCommand, newUmountCommand) }

type mountFlags struct {
	store        string
	foreground   bool
	readyFD      int
	precondition bool
	allowOther   bool
	debug        bool
	cacheMiB     int
	syncClose    bool
	noPassthru   bool
	noReadCopies bool
	readCopyMin  int64
	writeBackMiB int
	encodeNice   int
	deviceSize   string
	syncEvery    time.Duration
	cpuProfile   string
	memProfile   string
	options      string        // -o: generic mount options
	vfs          []string      // -o's generic options, for fs.Mount
	source       string        // the mount's source (default: the store)
	wait         time.Duration // for a previous daemon of the store that is still saving
	policy       policyFlags
	remote       remoteFlags
	tier         tierFlags
	tiering      chain.RepackOptions // the tier the flags state
}

func newMountCommand() *cobra.Command {
	var f mountFlags
	cmd := &cobra.Command{
		Use:   "mount [flags] MOUNTPOINT",
		Short: "Mount a ckptfs store on a directory",
		Long: `mount serves a ckptfs store at MOUNTPOINT and returns once the mount is ready
(the daemon keeps running in the background and logs to STORE/ckptfs.log).
With --foreground it stays in the foreground until unmounted or interrupted.

The store defaults to $XDG_DATA_HOME/ckptfs/stores/<path tail>-<hash of path>
(~/.local/share/... without XDG_DATA_HOME), so remounting a directory finds
its store again (a store made by an older ckptfs, named by the path alone,
is still found). The coding flags (` + codingFlagList() + `)
apply to files written from now on; a setting whose flag is not given keeps
the value the store was last mounted with. Unmount with "ckptfs umount
MOUNTPOINT" or "fusermount3 -u MOUNTPOINT".

mount(8) runs this program as /sbin/mount.fuse.ckptfs (make install links
it), so "mount -t fuse.ckptfs -o store=DIR SOURCE MOUNTPOINT" and fstab
lines of type fuse.ckptfs mount too: README.md lists the options.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mp, err := checkMountpoint(args[0])
			if err != nil {
				return withExit(exitMountPoint, err)
			}
			if f.store == "" {
				if f.store, err = defaultStoreDir(mp); err != nil {
					return err
				}
			}
			// Absolute: the daemon's cwd is not its umount's, which finds
			// the store in stats.json.
			if f.store, err = filepath.Abs(f.store); err != nil {
				return err
			}
			if f.source == "" {
				f.source = f.store
			}
			if f.vfs, err = parseMountOptions(f.options, os.Geteuid() == 0, &f.allowOther); err != nil {
				return err
			}
			if err := checkStoreOutside(f.store, mp); err != nil {
				return withExit(exitStore, err)
			}
			if err := checkStoreTrusted(f.store); err != nil {
				return withExit(exitStore, err)
			}
			if err := checkFUSE(); err != nil {
				return err
			}
			pol, err := f.policy.policy()
			if err != nil {
				return err
			}
			// Flags are checked before anything is created, so that a
			// typo leaves no store behind.
			if _, err := deviceForSize(f.deviceSize); err != nil {
				return err
			}
			if err := f.remote.check(); err != nil {
				return err
			}
			if f.tiering, err = f.tier.options(cmd.Flags()); err != nil {
				return err
			}
			if f.tiering.Online && f.remote.url != "" {
				return errors.New("--tier does not go with --remote yet: the bucket holds the versions as they were uploaded")
			}
			created, err := missingDirs(f.store)
			if err != nil {
				return err
			}
			_, statErr := os.Stat(filepath.Join(f.store, medium.MetaFile))
			newStore := errors.Is(statErr, os.ErrNotExist)
			// The daemon this one starts was waited for already.
			if f.readyFD == 0 {
				// On stdout, beside "mounted": mount(8)'s helper discards it, as
				// helpers say nothing when all is well (fstests compares output).
				if err := waitPreviousDaemon(cmd.OutOrStdout(), f.store, f.wait); err != nil {
					return withExit(exitStore, err)
				}
			}
			served := false
			if !f.foreground {
				err = daemonize(cmd.OutOrStdout(), mp, f.store, daemonArgs(cmd.Flags(), mp, f.store))
				served = err == nil
			} else {
				served, err = serve(mp, f, pol)
			}
			// A daemon started by daemonize leaves that to the process
			// that started it, which reads the log first (the reason
			// fusermount3 gave is there).
			if err != nil && !served && newStore && f.readyFD == 0 {
				removeNewStore(f.store, created)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.store, "store", "", "store directory (created 0700 if missing)")
	fl.BoolVar(&f.foreground, "foreground", false, "stay in the foreground until unmounted")
	fl.IntVar(&f.readyFD, "ready-fd", 0, "internal: file descriptor to report readiness on")
	fl.MarkHidden("ready-fd")
	fl.BoolVar(&f.precondition, "precondition", false, "warm a new store's simulated SSD up to the paper's Table 8 state, so GC runs from the start")
	fl.StringVar(&f.deviceSize, "device-size", "", "physical size of a new store's simulated SSD, e.g. 64MiB, or \"paper\" for the paper's 32 GiB device (default: as much as the store's host filesystem has free)")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let other users access the mount")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request")
	fl.IntVar(&f.cacheMiB, "cache-mib", 0, "memory for plain chunks, in MiB: the references of the next saves (7/8, leaving reads at least 16 MiB) and rebuilt chunks for reads; more keeps the last save of larger checkpoints as the next one's reference instead of rebuilding it from the device (default 64)")
	fl.BoolVar(&f.syncClose, "sync-close", false, "commit each file before close returns (default: close returns with the bytes in the page cache, in the file's staging file, and the commit follows in the background; fsync waits for it)")
	fl.BoolVar(&f.noPassthru, "no-passthrough", false, "have the daemon write the staging files of files being saved even where the kernel could serve them itself (FUSE passthrough: Linux 6.9+, root)")
	fl.BoolVar(&f.noReadCopies, "no-read-copies", false, "serve every read through the kernel's page cache, as requests to the daemon: without it, a reader opening a committed file of 1 MiB or more gets the content rebuilt into a staging file that the kernel serves it from (FUSE passthrough), so that reading it again or from several processes costs what it costs on the host filesystem")
	fl.Int64Var(&f.readCopyMin, "read-copy-min", 0, "the smallest file, in bytes, a reader gets a read copy of (default 1 MiB; tests)")
	fl.MarkHidden("read-copy-min")
	fl.IntVar(&f.encodeNice, "encode-nice", chain.DefaultEncodeNice, "lower the CPU priority of the threads that encode written files by this nice value, and that of the daemon's session (its scheduling group under autogroup), so that a training that keeps the cores busy runs first (0: neither is lowered)")
	fl.IntVar(&f.writeBackMiB, "write-back-mib", 0, "no effect: saves wait in the page cache, in their staging files, not in the daemon's memory")
	fl.MarkDeprecated("write-back-mib", "saves wait in the page cache (staging files), not in the daemon's memory")
	fl.DurationVar(&f.syncEvery, "sync-every", 5*time.Minute, "save the simulated device's state this often (0: only at fsync and unmount)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the daemon to this file (debugging)")
	fl.MarkHidden("cpuprofile")
	fl.StringVar(&f.memProfile, "memprofile", "", "write a heap profile of the daemon to this file at SIGUSR1 and at exit (debugging)")
	fl.MarkHidden("memprofile")
	fl.StringVarP(&f.options, "options", "o", "", "generic mount options, comma-separated as mount(8) takes them: ro, rw, noatime, relatime, strictatime, nodev, dev, nosuid, suid, noexec, exec (dev and suid: root only; the default is nosuid,nodev), allow_other")
	fl.StringVar(&f.source, "source", "", "the mount's source in /proc/mounts, findmnt and df (default: the store directory)")
	fl.DurationVar(&f.wait, "wait", previousDaemonWait, "how long to wait for the previous daemon of the store, unmounted but still saving it, to finish (a store whose daemon still serves a mount is refused at once)")
	f.policy.register(fl)
	f.remote.register(fl)
	f.tier.register(fl)
	return cmd
}

// checkMountpoint returns the absolute mount point, refusing missing,
// non-directory and busy ones; a dead ckptfs mount left by a killed daemon
// is cleared (lazily unmounted), saying so.
func checkMountpoint(arg string) (string, error) {
	mp, err := filepath.Abs(arg)
	if err != nil {
		return "", err
	}
	err = probeMount(mp)
	// ENOTCONN: the connection is gone; ECONNABORTED: the probe was
	// queued while the daemon was dying, and ended by the abort.
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
		if fstype, ok := mountType(mp); !ok || fstype != ckptfsType {
			what := "inside a dead FUSE mount"
			if ok {
				what = "a dead " + fstype + " mount"
			}
			return "", fmt.Errorf("mount point %s is %s (its server died): unmount it first (fusermount3 -u -z)", mp, what)
		}
		logrus.Warnf("%s is a dead ckptfs mount (its daemon died); unmounting it", mp)
		if err := unmount(mp, true); err != nil {
			return "", fmt.Errorf("clear dead mount %s: %w", mp, err)
		}
		err = probeMount(mp)
	}
	fi, serr := os.Stat(mp)
	if err == nil {
		err = serr
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("mount point %s does not exist: create it first", mp)
	case err != nil:
		return "", fmt.Errorf("mount point %s: %w", mp, err)
	case !fi.IsDir():
		return "", fmt.Errorf("mount point %s is not a directory", mp)
	}
	if mounted(mp) {
		return "", fmt.Errorf("mount point %s is busy: something is already mounted there", mp)
	}
	warnHidden(mp)
	return mp, nil
}

// warnHidden warns that the mount will hide what the mount point holds: a
// training mounted over its output directory would not find the
// checkpoints saved there before, and start again from scratch.
func warnHidden(mp string) {
	d, err := os.Open(mp)
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(4)
	if len(names) == 0 {
		return
	}
	list := strings.Join(names[:min(len(names), 3)], ", ")
	if len(names) > 3 {
		list += ", ..."
	}
	logrus.Warnf("mount point %s is not empty: what it holds (%s) is hidden while ckptfs is mounted there, and is not in the store (a training that resumes from it will not find its checkpoints: copy them in after mounting)", mp, list)
}

// ckptfsType is the file system type of a ckptfs mount in mountinfo.
const ckptfsType = "fuse.ckptfs"

// probeTimeout bounds how long probeMount waits for a mount's server.
const probeTimeout = 5 * time.Second

// probeMount stats mp with a request to the file system itself
// (AT_STATX_FORCE_SYNC): a plain stat of a FUSE mount whose daemon just
// died is answered from the kernel's attribute cache for up to a second,
// while the request fails with ENOTCONN at once (or ECONNABORTED as soon as
// the dying daemon's /dev/fuse descriptor closes). A server that does not answer
// within probeTimeout counts as alive.
func probeMount(mp string) error {
	done := make(chan error, 1)
	go func() {
		var stx unix.Statx_t
		done <- unix.Statx(unix.AT_FDCWD, mp, unix.AT_STATX_FORCE_SYNC, unix.STATX_TYPE|unix.STATX_MODE, &stx)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(probeTimeout):
		return nil
	}
}

// mounted reports whether mp is a mount point, from /proc/self/mountinfo.
func mounted(mp string) bool {
	_, ok := mountType(mp)
	return ok
}

// mountType returns the file system type of the topmost mount at mp, from
// /proc/self/mountinfo; ok is false if mp is not a mount point.
func mountType(mp string) (fstype string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) <= 4 || unescapeMountinfo(fields[4]) != mp {
			continue
		}
		ok, fstype = true, ""
		for i := 5; i+1 < len(fields); i++ {
			if fields[i] == "-" {
				fstype = fields[i+1]
				break
			}
		}
	}
	return fstype, ok
}

func unescapeMountinfo(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// missingDirs lists dir and those of its parents that do not exist yet,
// deepest first: what a mount creates, and removes again if it fails.
func missingDirs(dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var missing []string
	for {
		_, err := os.Lstat(dir)
		if err == nil {
			return missing, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
		missing = append(missing, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return missing, nil
		}
		dir = parent
	}
}

// removeNewStore removes what a mount that never served created: the
// store directory and its new parents (each only if empty) when the
// directory was new, else the store's files in the directory that had none.
func removeNewStore(store string, created []string) {
	if storeLocked(store) {
		return // another daemon created it meanwhile and holds it
	}
	if len(created) == 0 {
		for _, name := range medium.Files {
			if err := os.Remove(filepath.Join(store, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				logrus.WithError(err).Warn("remove what the failed mount created")
			}
		}
		return
	}
	if err := os.RemoveAll(created[0]); err != nil {
		logrus.WithError(err).Warnf("remove %s, created by the failed mount", store)
		return
	}
	for _, d := range created[1:] {
		if os.Remove(d) != nil {
			return
		}
	}
}

// daemonExecutable is the program daemonize starts (tests replace it).
var daemonExecutable = os.Executable

// errReported is an error the daemon has already handed to the process
// that started it, and that main does not print again (into the log of
// the daemon that holds the store, for a refused second mount).
type errReported struct{ error }

// storeLocked reports whether a ckptfs process holds the store open.
func storeLocked(store string) bool {
	return meta.Locked(filepath.Join(store, medium.MetaFile))
}

// daemonArgs are the daemon's arguments: the flags this mount was given,
// whatever command line they came from (mount(8)'s helper translates its
// own), then the daemon's own, and the absolute mount point.
func daemonArgs(fl *pflag.FlagSet, mp, store string) []string {
	args := []string{"mount"}
	fl.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "store", "foreground", "ready-fd":
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() { // repeatable: once per value
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return append(args, "--foreground", "--ready-fd=3", "--store="+store, "--", mp)
}

// daemonize starts the daemon (this program in the foreground, in a session
// of its own, with args) and waits until it says the mount is ready or why
// it failed.
func daemonize(out io.Writer, mp, store string, args []string) error {
	// A store in use is refused before its log is opened: the log belongs
	// to the daemon that holds it.
	if storeLocked(store) {
		return withExit(exitStore, fmt.Errorf("store %s is in use by another ckptfs daemon", store))
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return fmt.Errorf("store %s: %w", store, err)
	}
	logPath := filepath.Join(store, medium.LogFile)
	logFile, err := openNoFollow(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	defer logFile.Close()
	logStart, _ := logFile.Seek(0, io.SeekEnd)
	rd, wr, err := os.Pipe()
	if err != nil {
		return err
	}
	exe, err := daemonExecutable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{wr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	wr.Close()
	msg, _ := io.ReadAll(rd)
	rd.Close()
	text := strings.TrimSpace(string(msg))
	if text == "ok" {
		cmd.Process.Release()
		fmt.Fprintf(out, "mounted %s (store %s, log %s)\n", mp, store, logPath)
		return nil
	}
	cmd.Wait()
	if text == "" {
		text = "the daemon exited before mounting; see " + logPath
	}
	if reason := fusermountSaid(logPath, logStart); reason != "" && strings.Contains(text, "fusermount") {
		text += ": " + reason
	}
	return errors.New(text)
}

// fusermountSaid returns what fusermount3 wrote to the daemon's log from
// offset start on (why it refused a mount: its exit status alone says
// nothing), its lines joined by "; ".
func fusermountSaid(logPath string, start int64) string {
	f, err := openNoFollow(logPath, os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	var said []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		prog, _, _ := strings.Cut(line, ":") // "/usr/bin/fusermount3: ..."
		if strings.HasPrefix(filepath.Base(prog), "fusermount") {
			said = append(said, line)
		}
	}
	return strings.Join(said, "; ")
}

// checkStoreOutside refuses a store inside the mount point it is mounted
// on (symlinks resolved): once mounted, the daemon would keep its store in
// its own files, the periodic state save writing into the user's files or
// failing.
func checkStoreOutside(store, mp string) error {
	st, err := resolveExisting(store)
	if err != nil {
		return fmt.Errorf("store %s: %w", store, err)
	}
	m, err := resolveExisting(mp)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mp, err)
	}
	if rel, err := filepath.Rel(m, st); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("store %s is inside the mount point %s, where the mount would hide it: put the store elsewhere (--store)", store, mp)
	}
	return nil
}

// resolveExisting returns the absolute path p with the symlinks of its
// longest existing prefix resolved.
func resolveExisting(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, os.ErrNotExist) || parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

func newUmountCommand() *cobra.Command {
	var lazy bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "umount MOUNTPOINT",
		Short: "Unmount a ckptfs mount and wait for its daemon to save the store",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mp, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			// Only ckptfs mounts: the type is read for the resolved path
			// (mountinfo lists those); one not listed is left to umount2
			// or fusermount3, which say whether it is mounted.
			real := mp
			if r, err := filepath.EvalSymlinks(mp); err == nil {
				real = r
			}
			if fstype, ok := mountType(real); ok && fstype != ckptfsType {
				return fmt.Errorf("%s is not a ckptfs mount (it is %s): ckptfs umount leaves it alone; use umount(8)", mp, fstype)
			}
			store := storeOfMount(mp)
			if err := unmount(mp, lazy); err != nil {
				return err
			}
			if store != "" {
				return waitUnlocked(store, wait)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&lazy, "lazy", false, "detach now even if files are open (the daemon finishes when they close)")
	cmd.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the daemon to close the store")
	return cmd
}

// storeOfMount asks a running daemon for its store directory.
func storeOfMount(mp string) string {
	b, err := os.ReadFile(filepath.Join(mp, ".ckptfs", "stats.json"))
	if err != nil {
		return ""
	}
	var r struct {
		Store string `json:"store"`
	}
	_ = json.Unmarshal(b, &r)
	return r.Store
}

// unmount detaches mp: umount2 as root, fusermount3 otherwise.
func unmount(mp string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		if err := syscall.Unmount(mp, flags); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("unmount %s: files are still open (close them, or use --lazy): %w", mp, err)
			}
			if errors.Is(err, syscall.EINVAL) { // umount2: not a mount point
				return fmt.Errorf("%s is not mounted", mp)
			}
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
		return nil
	}
	args := []string{"-u", mp}
	if lazy {
		args = []string{"-u", "-z", mp}
	}
	out, err := exec.Command("fusermount3", args...).CombinedOutput()
	if err != nil {
		if real, rerr := filepath.EvalSymlinks(mp); rerr == nil && !mounted(real) {
			return fmt.Errorf("%s is not mounted", mp)
		}
		return fmt.Errorf("fusermount3 -u %s: %v: %s", mp, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitUnlocked waits until no process holds the store's lock, so the
// caller can rely on the store being saved when umount returns.
func waitUnlocked(store string, limit time.Duration) error {
	path := filepath.Join(store, medium.MetaFile)
	if err := meta.WaitUnlocked(path, limit); err != nil {
		return fmt.Errorf("the daemon still holds %s after %v", path, limit)
	}
	return nil
}

// cacheBytes is --cache-mib in bytes; 0 is the default.
func cacheBytes(mib int) int64 {
	if mib <= 0 {
		return chain.MountCacheBytes
	}
	return int64(mib) << 20
}

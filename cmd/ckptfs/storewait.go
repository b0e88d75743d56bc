package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain/medium"
)

// An unmount returns as soon as the kernel lets go of the mount, while the
// daemon goes on saving the store (commits of files closed before it, the
// simulated SSDs' state) for a second or more, holding the store's lock:
// "umount MNT && ckptfs mount ..." would be refused. A mount waits for
// such a daemon instead; a store whose daemon still serves a mount, or that
// anything else holds, is refused at once as before. The daemon is told
// apart by what the system shows of it, not by a file of the store's: the
// holder of the lock (/proc/locks), its command line (a ckptfs mount of
// this store, and its mount point) and its mounts (/proc/PID/mountinfo).

// previousDaemonWait is how long a mount waits by default (--wait).
const previousDaemonWait = time.Minute

// unknownHolderGrace is how long a holder that cannot be told to be a
// ckptfs daemon may keep the store before a mount is refused: long enough
// for a daemon killed with SIGKILL just before to finish exiting.
const unknownHolderGrace = 2 * time.Second

// pollPrevious is how often the wait looks at the store again.
const pollPrevious = 50 * time.Millisecond

// waitPreviousDaemon waits, up to limit, until no ckptfs daemon that has
// lost its mount holds store, saying so once on w; it fails at once if a
// daemon that still serves its mount, or another process, holds it.
func waitPreviousDaemon(w io.Writer, store string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	unknownUntil := time.Now().Add(unknownHolderGrace)
	said := false
	for storeLocked(store) {
		h, ok := findStoreHolder(store)
		switch {
		case !ok && !storeLocked(store):
			return nil // let go while we looked
		case !ok && time.Now().Before(unknownUntil):
			// A daemon killed a moment ago holds its lock until it has
			// exited, and shows no command line while it exits.
			time.Sleep(pollPrevious)
			continue
		case !ok:
			return fmt.Errorf("store %s is in use by another ckptfs daemon", store)
		case h.serving:
			return fmt.Errorf("store %s is in use by another ckptfs daemon (pid %d, mounted on %s)", store, h.pid, h.mountpoint)
		case time.Now().After(deadline):
			return fmt.Errorf("store %s is in use by another ckptfs daemon (pid %d): no longer mounted on %s, it still holds the store after %v (files still open in a lazily unmounted mount?)", store, h.pid, h.mountpoint, limit)
		}
		if !said {
			fmt.Fprintf(w, "ckptfs: waiting for the previous daemon of %s to finish saving\n", store)
			said = true
		}
		time.Sleep(pollPrevious)
	}
	return nil
}

// storeHolder is a ckptfs mount daemon that holds a store.
type storeHolder struct {
	pid        int
	mountpoint string // absolute, in the daemon's view
	serving    bool   // its mount point is a ckptfs mount in its mount namespace
}

// findStoreHolder finds the ckptfs mount daemon that holds store's lock;
// ok is false if the holder is not one (or cannot be seen).
func findStoreHolder(store string) (h storeHolder, ok bool) {
	metaPath := filepath.Join(store, medium.MetaFile)
	var st syscall.Stat_t
	if err := syscall.Stat(metaPath, &st); err != nil {
		return h, false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return h, false
	}
	for _, pid := range flockHolders(string(locks), st.Ino) {
		mp, ok := daemonMountpoint(pid, metaPath)
		if !ok {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			continue
		}
		return storeHolder{pid: pid, mountpoint: mp, serving: ckptfsMountedAt(string(info), mp)}, true
	}
	return h, false
}

// flockHolders returns the processes that hold a flock(2) on inode ino, from
// /proc/locks ("1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"; waiters'
// lines have "->" before FLOCK). The device is not compared: stat and the
// lock table disagree on it for btrfs subvolumes and overlayfs; the caller
// checks that the process's store is the same file.
func flockHolders(locks string, ino uint64) []int {
	var pids []int
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		i := strings.LastIndexByte(f[5], ':')
		n, err := strconv.ParseUint(f[5][i+1:], 10, 64)
		if err != nil || n != ino {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// daemonMountpoint returns the mount point of process pid if it is a ckptfs
// mount of the store whose metadata is metaPath, from its command line
// (parsed with this program's flags) and its working directory.
func daemonMountpoint(pid int, metaPath string) (string, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", false
	}
	store, mp, ok := mountCommandLine(strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"))
	if !ok {
		return "", false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return "", false
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(cwd, p)
	}
	theirs, err1 := os.Stat(filepath.Join(abs(store), medium.MetaFile))
	ours, err2 := os.Stat(metaPath)
	if err1 != nil || err2 != nil || !os.SameFile(theirs, ours) {
		return "", false
	}
	return abs(mp), true
}

// mountCommandLine returns the store and mount point of a "ckptfs mount"
// command line argv (argv[0] the program); ok is false for any other
// command, and for a mount without --store (its default store depends on
// the other process's environment).
func mountCommandLine(argv []string) (store, mp string, ok bool) {
	if len(argv) < 2 {
		return "", "", false
	}
	cmd, rest, err := newRootCommand().Find(argv[1:])
	if err != nil || cmd.Name() != "mount" || cmd.ParseFlags(rest) != nil {
		return "", "", false
	}
	store, _ = cmd.Flags().GetString("store")
	args := cmd.Flags().Args()
	if store == "" || len(args) != 1 {
		return "", "", false
	}
	return store, args[0], true
}

// ckptfsMountedAt reports whether mountinfo lists a ckptfs mount at mp,
// as given or with its symlinks resolved (mountinfo lists resolved paths).
func ckptfsMountedAt(mountinfo, mp string) bool {
	resolved := resolveOutside(mp)
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) <= 4 {
			continue
		}
		if at := unescapeMountinfo(f[4]); at != mp && at != resolved {
			continue
		}
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" && f[i+1] == ckptfsType {
				return true
			}
		}
	}
	return false
}

// resolveOutside resolves the symlinks of path p without a request to a
// file system mounted at p (whose daemon may not answer): the parent is
// resolved, and p itself only read as a link (readlink of a mount's root
// is refused by the VFS, not asked of the file system).
func resolveOutside(p string) string {
	for range 40 {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return p
		}
		p = filepath.Join(dir, filepath.Base(p))
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		p = filepath.Clean(target)
	}
	return p
}

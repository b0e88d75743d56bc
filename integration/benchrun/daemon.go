package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/chain/storedir"
)

// daemon is a ckptfs mount started for one section, on a fresh store in the
// scratch directory.
type daemon struct {
	b          *bench
	mnt, store string
	pid        int
}

// mount starts `ckptfs mount` on scratch/name/{mnt,store} with extra flags.
func (b *bench) mount(name string, flags ...string) (*daemon, error) {
	d := &daemon{b: b, mnt: filepath.Join(b.tmp, name, "mnt"), store: filepath.Join(b.tmp, name, "store")}
	if err := os.MkdirAll(d.mnt, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"mount", "--store", d.store}, flags...)
	if _, err := b.output(nil, b.bin, append(args, d.mnt)...); err != nil {
		return nil, err
	}
	pid, err := daemonPID(b.bin, d.mnt)
	if err != nil {
		exec.Command(b.bin, "umount", d.mnt).Run()
		return nil, err
	}
	d.pid = pid
	return d, nil
}

// daemonPID finds the daemon serving mnt from the processes' command lines.
func daemonPID(bin, mnt string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 3 || args[0] != bin || args[1] != "mount" {
			continue
		}
		fg, here := false, false
		for _, a := range args {
			fg = fg || a == "--foreground"
			here = here || a == mnt
		}
		if fg && here {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no ckptfs daemon found serving %s", mnt)
}

// peakRSS is the daemon's VmHWM: the most memory it has held at once.
func (d *daemon) peakRSS() int64 { return procStatus(d.pid, "VmHWM") }

func procStatus(pid int, key string) int64 {
	return procKB(fmt.Sprintf("/proc/%d/status", pid), key)
}

// report is the mount's live stats.json.
func (d *daemon) report() (*storedir.Report, error) {
	b, err := os.ReadFile(filepath.Join(d.mnt, ".ckptfs", "stats.json"))
	if err != nil {
		return nil, err
	}
	var r storedir.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("stats.json: %w", err)
	}
	return &r, nil
}

// unmount stops the daemon and waits until it has exited (the store is
// saved when it has).
func (d *daemon) unmount() error {
	if _, err := d.b.output(nil, d.b.bin, "umount", d.mnt); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(d.pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon %d still running 2 minutes after umount %s", d.pid, d.mnt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// evictStore makes the next read through the mount cold: the store's files
// are written back and dropped from the page cache.
// evictStore drops the store's files from the page cache and the daemon's
// rebuilt chunks (.ckptfs/drop_caches): a read timed next is cold in both.
func (d *daemon) evictStore() {
	evictTree(d.store)
	_ = os.WriteFile(filepath.Join(d.mnt, ".ckptfs", "drop_caches"), []byte("1\n"), 0)
}

// evict writes a file back and drops its cached pages.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_ = unix.Fdatasync(int(f.Fd()))
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

func evictTree(root string) {
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			evict(p)
		}
		return nil
	})
}

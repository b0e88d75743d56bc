package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ckfs "github.com/ckptfs/ckptfs/fs"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serveLoopback is `benchrun loopback [-passthrough] ORIG MNT`: go-fuse's
// loopback filesystem of ORIG at MNT, with the mount options ckptfs uses
// (1 MiB writes and read-ahead, one-second attribute and entry timeouts).
//
// By default every read and write goes through the daemon, as it does
// for ckptfs: the two then differ only in what the daemon does with the
// bytes, and the loopback is the floor of any filesystem served that way.
// With -passthrough, go-fuse hands the kernel each open file's backing
// file (FUSE passthrough, Linux 6.9 and root), and reads and writes no
// longer reach the daemon at all: the kernel serves them from the backing
// file as it would a plain directory. It prints "ready" once mounted and
// unmounts on SIGTERM or SIGINT.
func serveLoopback(args []string) error {
	passthrough := len(args) > 0 && args[0] == "-passthrough"
	if passthrough {
		args = args[1:]
	}
	if len(args) != 2 {
		return errors.New("usage: benchrun loopback [-passthrough] ORIG MNT")
	}
	root, err := gofs.NewLoopbackRoot(args[0])
	if err != nil {
		return err
	}
	sec := time.Second
	o := &gofs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NullPermissions: true}
	o.MaxWrite = 1 << 20
	o.MaxReadAhead = 1 << 20
	o.FsName, o.Name = "loopback", "loopback"
	if !passthrough {
		o.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	o.DirectMount = os.Geteuid() == 0
	server, err := gofs.Mount(args[1], root, o)
	if err != nil {
		return fmt.Errorf("mount %s: %w", args[1], err)
	}
	if o.DirectMount {
		// The same kernel read-ahead as a ckptfs mount (fs.Mount).
		if _, err := ckfs.SetReadAhead(args[1], ckfs.ReadAheadKiB); err != nil {
			server.Unmount()
			return err
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		server.Unmount()
	}()
	fmt.Println("ready")
	server.Wait()
	return nil
}

// loopback is a running loopback server.
type loopback struct {
	cmd *exec.Cmd
	mnt string
}

// startLoopback mounts orig at mnt with this program as the server,
// forwarding every read and write through it unless passthrough.
func (b *bench) startLoopback(orig, mnt string, passthrough bool) (*loopback, error) {
	for _, d := range []string{orig, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	args := []string{"loopback", orig, mnt}
	if passthrough {
		args = []string{"loopback", "-passthrough", orig, mnt}
	}
	cmd := exec.Command(b.self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("loopback server did not mount %s: %q %v", mnt, line, err)
	}
	return &loopback{cmd: cmd, mnt: mnt}, nil
}

func (l *loopback) stop() error {
	l.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- l.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		exec.Command("fusermount3", "-u", "-z", l.mnt).Run()
		l.cmd.Process.Kill()
		return fmt.Errorf("loopback server of %s did not stop", l.mnt)
	}
}

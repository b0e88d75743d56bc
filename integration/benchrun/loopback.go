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
)

// serveLoopback is `benchrun loopback ORIG MNT`: go-fuse's loopback
// filesystem of ORIG at MNT, with the mount options ckptfs uses (1 MiB
// writes and read-ahead, one-second attribute and entry timeouts), so that
// the two differ only in what the daemon does with the bytes. It prints
// "ready" once mounted and unmounts on SIGTERM or SIGINT.
func serveLoopback(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: benchrun loopback ORIG MNT")
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

// startLoopback mounts orig at mnt with this program as the server.
func (b *bench) startLoopback(orig, mnt string) (*loopback, error) {
	for _, d := range []string{orig, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(b.self, "loopback", orig, mnt)
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

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Linux carries a process's peak RSS across fork and exec: Go starts a
// child in the parent's address space (vfork), so the child's ru_maxrss is
// at least the parent's RSS at that moment. benchrun holds hundreds of MiB
// by the time it measures a replay, and that would be reported as the
// replay's. "benchrun peakrss OUT CMD ARGS..." is a small fresh process that
// runs CMD and writes the child's own ru_maxrss (KiB) to OUT; its own few
// MiB are the most the figure can be inflated by.
func servePeakRSS(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: benchrun peakrss OUT CMD [ARGS...]")
	}
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	runErr := cmd.Run()
	if cmd.ProcessState == nil {
		return runErr
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return errors.New("no resource usage from wait4")
	}
	if err := os.WriteFile(args[0], []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o644); err != nil {
		return err
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		os.Exit(code)
	}
	return runErr
}

// peakRSS runs a command through "benchrun peakrss" and returns its stdout
// and its own peak RSS in bytes.
func (b *bench) peakRSS(name string, args ...string) ([]byte, int64, error) {
	f, err := os.CreateTemp(b.tmp, "peakrss-")
	if err != nil {
		return nil, 0, err
	}
	f.Close()
	defer os.Remove(f.Name())
	out, err := b.output(nil, b.self, append([]string{"peakrss", f.Name(), name}, args...)...)
	if err != nil {
		return out, 0, err
	}
	raw, err := os.ReadFile(f.Name())
	if err != nil {
		return out, 0, err
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return out, 0, fmt.Errorf("peakrss output %q: %w", raw, err)
	}
	return out, kib << 10, nil
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// output runs a program in the repository root and returns its stdout; its
// stderr (the tail) goes into the error.
func (b *bench) output(env []string, name string, args ...string) ([]byte, error) {
	out, _, err := b.timed(env, name, args...)
	return out, err
}

// timed is output that also returns the child's resource usage.
func (b *bench) timed(env []string, name string, args ...string) ([]byte, *syscall.Rusage, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ru *syscall.Rusage
	if cmd.ProcessState != nil {
		ru, _ = cmd.ProcessState.SysUsage().(*syscall.Rusage)
	}
	if err != nil {
		tail := stderr.String()
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return stdout.Bytes(), ru, fmt.Errorf("%s: %w\n%s", b.display(append([]string{name}, args...)...), err, tail)
	}
	return stdout.Bytes(), ru, nil
}

// display writes a command as the document shows it: the binary and paths
// in the repository relative to it, scratch paths under $TMP.
func (b *bench) display(args ...string) string {
	out := make([]string, len(args))
	for i, a := range args {
		a = strings.ReplaceAll(a, b.bin, "bin/ckptfs")
		a = strings.ReplaceAll(a, b.tmp, "$TMP")
		a = strings.ReplaceAll(a, b.root+"/", "")
		if a == b.self {
			a = "benchrun"
		}
		if strings.ContainsAny(a, " '*$()") && !strings.HasPrefix(a, "$TMP") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// seriesFiles lists a training series' checkpoints in training order, and
// the glob the document names them by.
func (b *bench) seriesFiles(set string) ([]string, string, error) {
	files, err := filepath.Glob(filepath.Join(b.series, set, "ckpt-*.pt"))
	if err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("no checkpoints in %s (run make series)", filepath.Join(b.series, set))
	}
	sort.Strings(files)
	rel, err := filepath.Rel(b.root, filepath.Join(b.series, set, "ckpt-*.pt"))
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = filepath.Join(b.series, set, "ckpt-*.pt")
	}
	return files, rel, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mbps is a rate in MB/s (10^6 bytes per second).
func mbps(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / seconds / 1e6
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }

// abTimes fills the medians and ratio of mount and plain times.
func abTimes(mount, plain []float64, bytesPerOp int64) *ABTimes {
	t := &ABTimes{Mount: mount, Plain: plain, MountMed: median(mount), PlainMed: median(plain), BytesPerOp: bytesPerOp}
	if t.PlainMed > 0 {
		t.Ratio = t.MountMed / t.PlainMed
	}
	t.MountMBs, t.PlainMBs = mbps(bytesPerOp, t.MountMed), mbps(bytesPerOp, t.PlainMed)
	return t
}

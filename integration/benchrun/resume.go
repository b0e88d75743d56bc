package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// resumeMiB is the training state of the resume section (--resume-mib).
var resumeMiB = 1024

// Resume is the restart of a job: a training state saved four times into
// a mount and a plain directory (each save deleting the one before), the
// mount unmounted and mounted again, and the newest checkpoint read back
// cold (bench_resume.py), side by side.
type Resume struct {
	Command         string `json:"command"`
	CheckpointBytes int64  `json:"checkpoint_bytes"`
	ChainDepth      int    `json:"chain_depth"` // of the checkpoint read
	// Ops: load (torch.load), read (1 MiB calls), again (the same read a
	// second time, warm).
	Ops       map[string]*ABTimes `json:"ops"`
	DaemonHWM int64               `json:"daemon_peak_rss"`
}

// runResumeSection saves into a fresh mount and a plain directory,
// remounts, and times the cold reads.
func runResumeSection(b *bench) error {
	py := venvPython()
	if _, err := os.Stat(py); err != nil {
		return fmt.Errorf("the writers' venv (make deps): %w", err)
	}
	script := filepath.Join(b.root, "integration/py/bench_resume.py")
	d, err := b.mount("resume")
	if err != nil {
		return err
	}
	plain := filepath.Join(b.tmp, "resume", "plain")
	defer os.RemoveAll(filepath.Join(b.tmp, "resume"))
	if err := os.MkdirAll(plain, 0o755); err != nil {
		d.unmount()
		return err
	}
	logf("resume: %d saves of %d MiB", 4, resumeMiB)
	out, err := b.output(nil, py, script, "save", "--mib", strconv.Itoa(resumeMiB), "--saves", "4", d.mnt, plain)
	if err == nil {
		err = d.unmount()
	} else {
		d.unmount()
	}
	if err != nil {
		return err
	}
	name := strings.TrimSpace(string(out))
	if d, err = b.mount("resume"); err != nil {
		return err
	}
	depth, _ := getxattrInt(filepath.Join(d.mnt, name), "user.ckptfs.chain_depth")
	args := []string{script, "read", "--reps", strconv.Itoa(b.reps), "--mount", d.mnt, "--store", d.store, "--plain", plain, name}
	logf("resume: cold reads of %s (chain depth %d), %d repetitions", name, depth, b.reps)
	out, err = b.output(nil, py, args...)
	hwm := d.peakRSS()
	if uerr := d.unmount(); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	var got struct {
		Bytes     int64                           `json:"bytes"`
		Identical bool                            `json:"identical"`
		Times     map[string]map[string][]float64 `json:"times"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("bench_resume.py output: %w", err)
	}
	if !got.Identical {
		return errors.New("bench_resume.py: the checkpoint read back from the mount differs from the plain copy")
	}
	sec := &Resume{Command: b.display(append([]string{"python"}, args...)...), CheckpointBytes: got.Bytes,
		ChainDepth: depth, Ops: map[string]*ABTimes{}, DaemonHWM: hwm}
	for op, t := range got.Times {
		sec.Ops[op] = abTimes(t["mount"], t["plain"], got.Bytes)
	}
	b.res.Resume = sec
	return nil
}

// getxattrInt reads an integer extended attribute.
func getxattrInt(path, name string) (int, error) {
	buf := make([]byte, 32)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(buf[:n]))
}

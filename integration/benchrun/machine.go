package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machineInfo describes this machine, for the document's first lines.
func machineInfo(python, scratch string) Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), LoadAvgStart: loadAvg()}
	m.MemTotal = meminfo("MemTotal")
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(python, "-c", "import torch; print(torch.__version__)").Output(); err == nil {
		m.Torch = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("df", "-h", "--output=source,fstype,size", scratch).Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		m.Disk = strings.Join(strings.Fields(lines[len(lines)-1]), " ")
	}
	return m
}

// meminfo returns a /proc/meminfo field in bytes.
func meminfo(key string) int64 { return procKB("/proc/meminfo", key) }

// procKB reads a "Key:   N kB" field of a /proc file (meminfo, PID/status)
// in bytes; 0 if it is missing.
func procKB(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// gitCommit names the measured tree: its commit, "+dirty" when it has
// uncommitted changes.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

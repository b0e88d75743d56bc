// Package integration mounts the real ckptfs ckptfsBin, as a user would, and
// drives it with real programs and real failures.
package integration

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ckptfsBin is the ckptfs built once for the whole test run.
var ckptfsBin string

func TestMain(m *testing.M) {
	if os.Getenv(peakRSSEnv) != "" {
		os.Exit(servePeakRSS(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "ckptfs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ckptfsBin = filepath.Join(dir, "ckptfs")
	args := []string{"build", "-o", ckptfsBin}
	if os.Getenv("CKPTFS_RACE") != "" {
		args = append(args, "-race") // the daemon itself runs under the race detector
	}
	build := exec.Command("go", append(args, "../cmd/ckptfs")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ckptfs:", err)
		os.Exit(2)
	}
	flag.Parse()
	watchHangs()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// full reports whether the long variant of the suite was asked for.
func full() bool { return os.Getenv("CKPTFS_FULL") != "" }

// requireDeps fails the test if CKPTFS_REQUIRE_DEPS is set (make test sets
// it), and otherwise skips it, loudly, saying what is missing.
func requireDeps(t testing.TB, what string, err error) {
	t.Helper()
	msg := fmt.Sprintf("!! SKIPPED: %s is unavailable (%v)", what, err)
	if os.Getenv("CKPTFS_REQUIRE_DEPS") != "" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, msg)
	t.Skip(msg)
}

func needFuse(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		requireDeps(t, "/dev/fuse", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			requireDeps(t, "fusermount3 (non-root mounts)", err)
		}
	}
}

// python returns Debian's python3 with torch, or skips.
func python(t testing.TB, modules ...string) string {
	t.Helper()
	py := "/usr/bin/python3"
	for _, m := range modules {
		if out, err := exec.Command(py, "-c", "import "+m).CombinedOutput(); err != nil {
			requireDeps(t, "python3 module "+m, fmt.Errorf("%v: %s", err, bytes.TrimSpace(out)))
		}
	}
	return py
}

// mount is one running ckptfs daemon.
type mount struct {
	t     testing.TB
	dir   string // mount point
	store string
	args  []string
	env   []string // added to the daemon's environment
	// allowed are the error lines the test provokes (allowErrors).
	allowed []*regexp.Regexp
}

// allowErrors declares the errors a test provokes: the daemon's log is
// part of every verdict, and a line at level error or fatal that matches
// none of these patterns fails the test.
func (m *mount) allowErrors(patterns ...string) {
	for _, p := range patterns {
		m.allowed = append(m.allowed, regexp.MustCompile(p))
	}
}

// newMount mounts a fresh store in a temp dir; extra flags go to mount.
func newMount(t testing.TB, flags ...string) *mount {
	t.Helper()
	return newMountEnv(t, nil, flags...)
}

// newMountEnv is newMount with env added to the daemon's environment.
func newMountEnv(t testing.TB, env []string, flags ...string) *mount {
	t.Helper()
	needFuse(t)
	base := t.TempDir()
	m := &mount{t: t, dir: filepath.Join(base, "mnt"), store: filepath.Join(base, "store"), args: flags, env: env}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() { m.stop() })
	return m
}

func (m *mount) start() {
	m.t.Helper()
	args := append([]string{"mount", "--store", m.store}, m.args...)
	args = append(args, m.dir)
	cmd := exec.Command(ckptfsBin, args...)
	if m.env != nil {
		cmd.Env = append(os.Environ(), m.env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("ckptfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// stop unmounts (if mounted) and waits for the daemon to release the store;
// then the daemon's log must show no data race and no panic.
func (m *mount) stop() {
	m.t.Helper()
	if isMounted(m.dir) {
		out, err := exec.Command(ckptfsBin, "umount", m.dir).CombinedOutput()
		if err != nil {
			m.t.Errorf("ckptfs umount: %v\n%s", err, out)
			exec.Command(ckptfsBin, "umount", "--lazy", m.dir).Run()
		}
	}
	m.checkLog()
}

// checkLog fails the test if the daemon reported a data race (a -race
// build, CKPTFS_RACE=1), panicked or wrote uncounted metadata, and shows the log's tail when the test
// has failed.
func (m *mount) checkLog() {
	m.t.Helper()
	b, _ := os.ReadFile(filepath.Join(m.store, "ckptfs.log"))
	if m.t.Failed() && len(b) > 0 {
		m.t.Logf("daemon log, last 4000 bytes:\n%s", b[max(0, len(b)-4000):])
	}
	// "device closed": a change committed after the devices closed, its
	// pages never counted.
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "device closed"} {
		if i := bytes.Index(b, []byte(bad)); i >= 0 {
			m.t.Errorf("daemon log reports %q:\n%.3000s", bad, b[i:])
		}
	}
	unexpected := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "level=error") && !strings.Contains(line, "level=fatal") {
			continue
		}
		if slices.ContainsFunc(m.allowed, func(re *regexp.Regexp) bool { return re.MatchString(line) }) {
			continue
		}
		if unexpected++; unexpected <= 5 {
			m.t.Errorf("daemon logged an error the test did not expect: %.600s", line)
		}
	}
	if unexpected > 5 {
		m.t.Errorf("... and %d more error lines", unexpected-5)
	}
}

// restart unmounts and mounts the same store again.
func (m *mount) restart() {
	m.t.Helper()
	m.stop()
	m.start()
}

func (m *mount) path(p string) string { return filepath.Join(m.dir, p) }

// run runs a ckptfs subcommand and returns its stdout.
func run(t testing.TB, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(ckptfsBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ckptfs %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// report is the subset of the stats JSON the tests read.
type report struct {
	LogicalBytes       int64    `json:"logical_bytes"`
	StoredBytes        int64    `json:"stored_bytes"`
	LossyFiles         int      `json:"lossy_files"`
	WrittenVolumeRatio float64  `json:"written_volume_ratio"`
	EraseRatio         *float64 `json:"erase_ratio"`
	Device             struct {
		HostPagesWritten int64 `json:"host_pages_written"`
		Erases           int64 `json:"erases"`
	} `json:"device"`
	Shadow struct {
		HostPagesWritten int64 `json:"host_pages_written"`
		Erases           int64 `json:"erases"`
	} `json:"shadow"`
	ShadowDirtyPages  int64 `json:"shadow_dirty_pages"`
	ShadowSparedPages int64 `json:"shadow_spared_pages"`
	// Metadata pages, on the device (bbolt's synced commits) and the
	// shadow's estimate (a page per change).
	MetadataPages       int64 `json:"metadata_pages_estimate"`
	ShadowMetadataPages int64 `json:"shadow_metadata_pages_estimate"`
	// EveryCommitRatio is the device's pages ÷ the shadow's charged at
	// every commit (written, still dirty or spared by its page cache
	// model): what replay reports, and, unlike written_volume_ratio, not a
	// matter of how many seconds a test's saves took (docs/NANDSIM.md).
	EveryCommitRatio float64 `json:"written_volume_ratio_every_commit"`
	// WaitingForRoom: saves kept staged for want of room on the host.
	WaitingForRoom int64 `json:"saves_waiting_for_room"`
	Capacity       struct {
		UsableBytes int64  `json:"usable_bytes"`
		FlashBytes  int64  `json:"flash_bytes"`
		Source      string `json:"source"`
	} `json:"capacity"`
	Files []struct {
		Path  string `json:"path"`
		Depth uint32 `json:"chain_depth"`
	} `json:"files"`
}

// liveStats reads the mount's live report (.ckptfs/stats.json) into v.
func (m *mount) liveStats(v any) {
	m.t.Helper()
	b, err := os.ReadFile(m.path(".ckptfs/stats.json"))
	if err != nil {
		m.t.Fatalf("read the live report: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		m.t.Fatalf("parse the live report: %v: %.500s", err, b)
	}
}

func (m *mount) stats() report {
	m.t.Helper()
	var r report
	if err := json.Unmarshal([]byte(run(m.t, "stats", "--json", m.dir)), &r); err != nil {
		m.t.Fatal(err)
	}
	return r
}

// fsck runs ckptfs fsck --deep on the (unmounted) store and fails on problems.
func fsck(t testing.TB, store string) {
	t.Helper()
	run(t, "fsck", "--deep", "--store", store)
}

func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// sameFiles compares every regular file below a with the one at the same
// path below b, and the two trees' file lists.
func sameFiles(t testing.TB, a, b string) {
	t.Helper()
	list := func(root string) map[string]bool {
		out := map[string]bool{}
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				out[rel] = true
			}
			return nil
		})
		return out
	}
	la, lb := list(a), list(b)
	for p := range la {
		if !lb[p] {
			t.Errorf("%s only in %s", p, a)
			continue
		}
		if !sameContent(t, filepath.Join(a, p), filepath.Join(b, p)) {
			t.Errorf("%s differs", p)
		}
	}
	for p := range lb {
		if !la[p] {
			t.Errorf("%s only in %s", p, b)
		}
	}
}

func sameContent(t testing.TB, a, b string) bool {
	fa, err := os.Open(a)
	if err != nil {
		t.Error(err)
		return false
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Error(err)
		return false
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}

// pidOfMount finds the daemon serving dir, from its command line.
func pidOfMount(t testing.TB, dir string) int {
	t.Helper()
	return pidOfDaemon(t, ckptfsBin, dir)
}

// pidOfDaemon finds the daemon that the binary bin runs for dir.
func pidOfDaemon(t testing.TB, bin, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || args[0] != bin || args[1] != "mount" {
			continue
		}
		for _, a := range args {
			if a == dir {
				return pid
			}
		}
	}
	t.Fatalf("no daemon found for %s", dir)
	return 0
}

// kill9 kills the daemon of m with SIGKILL and clears the dead mount.
func (m *mount) kill9() {
	m.t.Helper()
	pid := pidOfMount(m.t, m.dir)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200; i++ {
		if err := syscall.Kill(pid, 0); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	exec.Command("umount", "-l", m.dir).Run()
	exec.Command("fusermount3", "-u", "-z", m.dir).Run()
}

// inEachSaveMode runs f as a subtest per save mode, with the mount flags
// that select it: passthrough (the default where the kernel allows it),
// where every reader of a committed file gets a read copy whatever its
// size, and daemon-written.
func inEachSaveMode(t *testing.T, f func(t *testing.T, flags ...string)) {
	t.Run("passthrough", func(t *testing.T) { f(t, "--read-copy-min=1") })
	t.Run("daemon-written", func(t *testing.T) { f(t, "--no-passthrough") })
}

package integration

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// wheelArches are the machine types make wheel builds: GOARCH, the wheel's
// name for it, and the ELF machine its program must be.
var wheelArches = []struct {
	goarch, arch string
	machine      elf.Machine
}{
	{"amd64", "x86_64", elf.EM_X86_64},
	{"arm64", "aarch64", elf.EM_AARCH64},
}

// TestPythonWheel builds the wheels as make wheel does, installs this
// machine's into a fresh virtual environment (the cached torch environment
// reached through a .pth, not installed twice), and with that install only:
// the ckptfs command and python -m ckptfs, an import that pulls in no torch,
// the API's errors, and the Hugging Face Trainer and Lightning with the
// callbacks, their logged figures checked against the mount's report
// (integration/py/api_check.py).
func TestPythonWheel(t *testing.T) {
	needFuse(t)
	py := venvPython(t)
	dir := t.TempDir()
	var version, wheel string
	for _, a := range wheelArches {
		prog := filepath.Join(dir, a.goarch, "ckptfs")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", prog, "../cmd/ckptfs")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+a.goarch)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build ckptfs for %s: %v: %s", a.goarch, err, out)
		}
		if a.goarch == runtime.GOARCH {
			out, err := exec.Command(prog, "version").Output()
			if err != nil {
				t.Fatalf("ckptfs version: %v", err)
			}
			version = strings.TrimPrefix(strings.TrimSpace(string(out)), "ckptfs ")
		}
	}
	if version == "" {
		t.Fatalf("no wheel is built for this machine (%s)", runtime.GOARCH)
	}
	for _, a := range wheelArches {
		out := runCmd(t, py, "../python/build_wheel.py", "--binary", filepath.Join(dir, a.goarch, "ckptfs"),
			"--arch", a.arch, "--version", version, "--out", filepath.Join(dir, "dist"))
		w := strings.TrimSpace(out)
		want := fmt.Sprintf("ckptfs-%s-py3-none-manylinux_2_17_%s.manylinux2014_%s.whl", version, a.arch, a.arch)
		if filepath.Base(w) != want {
			t.Fatalf("wheel %s, want %s", w, want)
		}
		checkWheelProgram(t, w, a.machine)
		if a.goarch == runtime.GOARCH {
			wheel = w
		}
	}

	venv := installWheel(t, py, wheel, filepath.Join(dir, "venv"))
	vpy := filepath.Join(venv, "bin", "python")
	// Only the wheel's install: its bin first, then the system's, no
	// CKPTFS_BINARY and no checkout's bin/ckptfs.
	env := []string{"PATH=" + filepath.Join(venv, "bin") + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir,
		"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}
	pyRun := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{filepath.Join(venv, "bin", "ckptfs"), "version"}, {vpy, "-m", "ckptfs", "version"}} {
		out, err := pyRun(args[0], args[1:]...)
		if err != nil || strings.TrimSpace(out) != "ckptfs "+version {
			t.Fatalf("%s: %q, %v; want ckptfs %s", strings.Join(args, " "), out, err, version)
		}
	}
	out, err := pyRun(vpy, "-c", `import sys, ckptfs, ckptfs.callbacks
assert "torch" not in sys.modules and "transformers" not in sys.modules and "lightning" not in sys.modules, sorted(sys.modules)
print(ckptfs.__file__, ckptfs.binary(), ckptfs.version())`)
	if err != nil || !strings.Contains(out, venv) || !strings.Contains(out, version) {
		t.Fatalf("import ckptfs from the wheel's install: %v\n%s", err, out)
	}

	check := func(t *testing.T, args ...string) {
		t.Helper()
		out, err := pyRun(vpy, append([]string{"../integration/py/api_check.py", "--dir", t.TempDir()}, args...)...)
		if err != nil {
			t.Fatalf("api_check.py %s: %v\n%s", strings.Join(args, " "), err, lastLines([]byte(out), 40))
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "NOT CHECKED") {
				t.Log(line)
			}
		}
	}
	t.Run("errors", func(t *testing.T) { check(t, "errors") })
	t.Run("no-fuse", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("!! SKIPPED: hiding /dev/fuse in a mount namespace needs root")
		}
		if _, err := exec.LookPath("unshare"); err != nil {
			requireDeps(t, "unshare (util-linux)", err)
		}
		// A regular file bound over /dev/fuse, in a mount namespace of the
		// script's own: FUSE is gone for it alone.
		fake := filepath.Join(t.TempDir(), "fuse")
		if err := os.WriteFile(fake, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("mount --bind %s /dev/fuse && exec %s ../integration/py/api_check.py errors --expect-no-fuse --dir %s",
			fake, vpy, t.TempDir())
		out, err := pyRun("unshare", "-m", "--propagation", "private", "sh", "-c", script)
		if err != nil {
			t.Fatalf("api_check.py errors --expect-no-fuse: %v\n%s", err, out)
		}
		t.Log(strings.TrimSpace(out))
	})
	t.Run("trainer", func(t *testing.T) { check(t, "trainer") })
	t.Run("lightning", func(t *testing.T) { check(t, "lightning") })
}

// checkWheelProgram checks that the wheel carries ckptfs/bin/ckptfs,
// executable, for machine, and static (no interpreter: it runs on any
// Linux, whatever its C library).
func checkWheelProgram(t *testing.T, wheel string, machine elf.Machine) {
	t.Helper()
	z, err := zip.OpenReader(wheel)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	names := map[string]bool{}
	for _, f := range z.File {
		names[f.Name] = true
		if f.Name != "ckptfs/bin/ckptfs" {
			continue
		}
		if f.Mode()&0o111 == 0 {
			t.Errorf("%s: ckptfs/bin/ckptfs is not executable (%v)", wheel, f.Mode())
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		e, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: ckptfs/bin/ckptfs: %v", wheel, err)
		}
		if e.Machine != machine {
			t.Errorf("%s: the program is for %v, want %v", wheel, e.Machine, machine)
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: the program is dynamically linked", wheel)
			}
		}
	}
	for _, want := range []string{"ckptfs/bin/ckptfs", "ckptfs/__init__.py", "ckptfs/__main__.py", "ckptfs/callbacks.py",
		"ckptfs/py.typed"} {
		if !names[want] {
			t.Errorf("%s lacks %s", wheel, want)
		}
	}
}

// installWheel makes a virtual environment at dir with pip install of the
// wheel alone; the cached environment's packages (torch, transformers,
// lightning) are reached through a .pth file.
func installWheel(t *testing.T, py, wheel, dir string) string {
	t.Helper()
	runCmd(t, py, "-m", "venv", "--without-pip", dir)
	vpy := filepath.Join(dir, "bin", "python")
	runCmd(t, py, "-m", "pip", "--python", vpy, "install", "--quiet", "--no-index", "--no-deps",
		"--disable-pip-version-check", wheel)
	site := strings.TrimSpace(runCmd(t, vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"))
	cached := strings.TrimSpace(runCmd(t, py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"))
	if err := os.WriteFile(filepath.Join(site, "cached-venv.pth"), []byte(cached+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "ckptfs")); err != nil {
		t.Fatalf("pip install put no ckptfs command in the venv: %v", err)
	}
	return dir
}

// runCmd runs a program and returns its standard output; it fails the test
// with both outputs if the program fails.
func runCmd(t testing.TB, name string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyTools: checkpoints copied into the mount and out of it with the
// tools people use, preserving extended attributes (rsync -aX, cp -a, tar
// --xattrs), arrive whole with the user's own attributes, and the copies
// out carry none of the attributes the mount computes (user.ckptfs.*,
// which describe a store the copy is not in). They were listed by
// listxattr: rsync -aX into the mount then failed (exit 23) removing them
// from its temporary files, and cp -a out of it copied them.
func TestCopyTools(t *testing.T) {
	for _, tool := range []string{"rsync", "tar", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			requireDeps(t, tool, err)
		}
	}
	m := newMount(t)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 3 {
		dir := filepath.Join(src, "checkpoint-"+string(rune('1'+i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.npy"), bigNpyOf(i, 1<<19), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "trainer_state.json"), []byte(`{"step": 1}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tagged := filepath.Join(src, "checkpoint-1", "model.npy")
	if err := unix.Setxattr(tagged, "user.run", []byte("exp1"), 0); err != nil {
		t.Skipf("the test's temporary directory takes no user.* attributes: %v", err)
	}
	sh := func(script string) {
		t.Helper()
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	out := t.TempDir()
	// Into the mount, twice with rsync (the second run compares and
	// updates in place), and out of it with each tool.
	sh("rsync -aX " + src + "/ " + m.path("r") + "/")
	sh("rsync -aX --inplace --no-whole-file " + src + "/ " + m.path("r") + "/")
	sh("tar -C " + src + " --xattrs -cf - . | tar -C " + m.path("") + " --xattrs -xf -")
	sh("cp -a " + src + " " + m.path("c"))
	sh("rsync -aX " + m.path("r") + "/ " + out + "/rsync/")
	sh("cp -a " + m.path("c") + " " + out + "/cp")
	sh("tar -C " + m.path("r") + " --xattrs -cf - . | (mkdir " + out + "/tar && tar -C " + out + "/tar --xattrs -xf -)")
	for _, d := range []string{m.path("r"), m.path("c"), m.path(""), out + "/rsync", out + "/cp", out + "/tar"} {
		for _, rel := range []string{"checkpoint-1/model.npy", "checkpoint-3/model.npy", "checkpoint-2/trainer_state.json"} {
			if !sameContent(t, filepath.Join(src, rel), filepath.Join(d, rel)) {
				t.Errorf("%s/%s differs from the source", d, rel)
			}
		}
		got := filepath.Join(d, "checkpoint-1", "model.npy")
		if v, err := getxattr(got, "user.run"); v != "exp1" {
			t.Errorf("%s: user.run = %q (%v), want exp1", got, v, err)
		}
		if strings.HasPrefix(d, out) {
			for _, a := range listXattrs(t, got) {
				if strings.HasPrefix(a, "user.ckptfs.") {
					t.Errorf("%s, copied out of the mount, carries %s", got, a)
				}
			}
		}
	}
	if v, err := getxattr(m.path("r/checkpoint-1/model.npy"), "user.ckptfs.codec"); v == "" {
		t.Errorf("user.ckptfs.codec does not read by name: %v", err)
	}
}

func listXattrs(t *testing.T, path string) []string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		t.Fatalf("listxattr %s: %v", path, err)
	}
	return strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
}

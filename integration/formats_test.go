package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCaffeNumpySafetensors writes a training-like series of Caffe
// .caffemodel/.solverstate files (python3-protobuf), np.save/np.savez files,
// safetensors files and plain text into the mount and a plain directory,
// and checks that every file reads back identical and that the store
// recognised each format and wrote less than a plain filesystem.
func TestCaffeNumpySafetensors(t *testing.T) {
	py := python(t, "numpy", "google.protobuf")
	if _, err := exec.LookPath("protoc"); err != nil {
		requireDeps(t, "protoc", err)
	}
	m := newMount(t)
	plain := t.TempDir()
	proto, _ := filepath.Abs("../encode/detect/testdata/caffe.proto")
	rounds := 6
	if full() {
		rounds = 15
	}
	cmd := exec.Command(py, "py/formats_series.py", m.path("run"), filepath.Join(plain, "run"), fmt.Sprint(rounds), proto)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("formats_series.py: %v\n%s", err, out)
	}
	sameFiles(t, m.dir, plain)
	formats := map[string]string{
		"run/snapshot_iter_2000.caffemodel":  "caffe",
		"run/snapshot_iter_2000.solverstate": "caffe",
		"run/weights-1.npy":                  "npy",
		"run/optim-1.npz":                    "npz",
		"run/model-1.safetensors":            "safetensors",
	}
	for p, want := range formats {
		got, err := getxattr(m.path(p), "user.ckptfs.format")
		if err != nil || got != want {
			t.Errorf("%s: format %q (%v), want %q", p, got, err, want)
		}
		depth, _ := getxattr(m.path(p), "user.ckptfs.chain_depth")
		if depth == "0" {
			t.Errorf("%s: stored as a baseline, want a delta against round 0", p)
		}
	}
	st := m.stats()
	if r := st.EveryCommitRatio; r >= 1 {
		t.Errorf("written volume ÷ the shadow charged at every commit %.3f: no saving", r)
	}
	t.Logf("written_volume_ratio %.3f (the shadow charged at every commit: %.3f)", st.WrittenVolumeRatio, st.EveryCommitRatio)
	m.restart()
	sameFiles(t, m.dir, plain)
	m.stop()
	fsck(t, m.store)
}

func getxattr(path, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := syscallGetxattr(path, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// trainer runs integration/py/trainer.py and returns its stdout (losses).
func trainer(t *testing.T, args ...string) string {
	t.Helper()
	py := python(t, "torch")
	cmd := exec.Command(py, append([]string{"py/trainer.py"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("trainer %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// torchLoadAll loads every checkpoint file below dir with torch.load.
func torchLoadAll(t *testing.T, dir string) int {
	t.Helper()
	py := python(t, "torch")
	script := `
import os, sys, torch
n = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        if f.endswith((".pt", ".bin", ".ckpt")):
            torch.load(os.path.join(root, f))
            n += 1
print(n)
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("torch.load under %s: %v\n%s", dir, err, out)
	}
	var n int
	fmt.Sscan(string(out), &n)
	return n
}

// TestTorchTraining runs unmodified torch.save trainings into the mount and
// into a plain directory, and checks that every file reads back identical,
// torch.load works, files survive a remount, a run resumed from the mount
// continues exactly like an uninterrupted run, and the device wrote less.
func TestTorchTraining(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"flat-adam-fp32", []string{"--layout", "flat", "--optimizer", "adam"}},
		{"flat-sgd-fp32", []string{"--layout", "flat", "--optimizer", "sgd"}},
		{"flat-modelonly-bf16", []string{"--layout", "flat", "--model-only", "--save-dtype", "bf16"}},
		{"hf-adamw-keep2", []string{"--layout", "hf", "--optimizer", "adamw", "--keep", "2"}},
		{"lightning-adam-fp16", []string{"--layout", "lightning", "--optimizer", "adam", "--save-dtype", "fp16"}},
	}
	steps := 100
	if full() {
		steps = 300
	}
	m := newMount(t)
	plain := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, mirror := m.path(c.name), filepath.Join(plain, c.name)
			args := append([]string{"--out", out, "--mirror", mirror, "--steps", fmt.Sprint(steps), "--every", "10"}, c.args...)
			trainer(t, args...)
			sameFiles(t, out, mirror)
			if n := torchLoadAll(t, out); n == 0 {
				t.Fatal("no checkpoint loaded from the mount")
			}
		})
	}
	// cp out and cmp, as a user would.
	cpDir := t.TempDir()
	if out, err := exec.Command("cp", "-r", m.path("flat-adam-fp32"), cpDir).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v %s", err, out)
	}
	if out, err := exec.Command("diff", "-r", filepath.Join(cpDir, "flat-adam-fp32"), filepath.Join(plain, "flat-adam-fp32")).CombinedOutput(); err != nil {
		t.Fatalf("cp'd checkpoints differ: %v %s", err, out)
	}
	st := m.stats()
	// The trainings save every few seconds, not minutes: a plain
	// filesystem's page cache would spare it most of the files they
	// rotate away, as many as the test's speed allows, so the figure
	// asserted is the shadow charged at every commit.
	if r := st.EveryCommitRatio; r <= 0 || r >= 1 {
		t.Errorf("written volume ÷ the shadow charged at every commit %.3f: the mount should write less than a plain filesystem", r)
	}
	t.Logf("after %d trainings: written_volume_ratio %.3f, against the shadow charged at every commit %.3f (device %d pages, plain %d written, %d dirty, %d spared)",
		len(cases), st.WrittenVolumeRatio, st.EveryCommitRatio, st.Device.HostPagesWritten, st.Shadow.HostPagesWritten, st.ShadowDirtyPages, st.ShadowSparedPages)

	m.restart()
	sameFiles(t, m.dir, plain)

	// Resume every layout from the mount and compare its losses with an
	// uninterrupted run into a plain directory.
	for _, c := range cases[:4] {
		if strings.Contains(c.name, "modelonly") {
			continue
		}
		resumed := trainer(t, append([]string{"--out", m.path(c.name), "--steps", fmt.Sprint(steps + 20), "--every", "10", "--resume"}, c.args...)...)
		straight := trainer(t, append([]string{"--out", t.TempDir(), "--steps", fmt.Sprint(steps + 20), "--every", "10"}, c.args...)...)
		if !strings.HasSuffix(straight, resumed) || resumed == "" {
			t.Errorf("%s: resumed run's losses differ from an uninterrupted run's:\nresumed:\n%s", c.name, resumed)
		}
	}

	// Rotation with rm -rf, then everything is freed.
	sh := exec.Command("sh", "-c", "rm -rf "+m.dir+"/hf-adamw-keep2/checkpoint-*")
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("rm -rf: %v %s", err, out)
	}
	if out, err := exec.Command("sh", "-c", "rm -rf "+m.dir+"/*").CombinedOutput(); err != nil {
		t.Fatalf("rm -rf: %v %s", err, out)
	}
	if ents, _ := os.ReadDir(m.dir); len(ents) != 0 {
		t.Fatalf("mount not empty after rm -rf: %v", ents)
	}
	m.stop()
	fsck(t, m.store)
	m.start()
	if st := m.stats(); st.StoredBytes != 0 {
		t.Fatalf("stored_bytes %d after deleting everything", st.StoredBytes)
	}
}

// TestParallelWriters has one process per rank write its shard at once, for
// several rounds, as data-parallel trainers do.
func TestParallelWriters(t *testing.T) {
	py := python(t, "torch")
	m := newMount(t)
	plain := t.TempDir()
	script := `
import sys, torch
rank, rounds, out, mirror = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(rank)
w = {"layer%d" % i: torch.randn(256, 256) for i in range(4)}
for r in range(rounds):
    for k in w:
        w[k] += 1e-3 * torch.randn_like(w[k])
    for d in (out, mirror):
        torch.save({"rank": rank, "round": r, "weights": w}, "%s/round-%d-rank-%d.pt" % (d, r, rank))
`
	const ranks, rounds = 4, 5
	var cmds []*exec.Cmd
	for r := 0; r < ranks; r++ {
		cmd := exec.Command(py, "-c", script, fmt.Sprint(r), fmt.Sprint(rounds), m.dir, plain)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	sameFiles(t, m.dir, plain)
	if n := torchLoadAll(t, m.dir); n != ranks*rounds {
		t.Fatalf("loaded %d checkpoints, want %d", n, ranks*rounds)
	}
	m.stop()
	fsck(t, m.store)
}

package integration

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRepackTierTorch saves torch.save and safetensors series into a
// mount, tiers the unmounted store (`ckptfs repack --lossy bf16`), and
// checks through a new mount with torch and safetensors themselves: every
// file loads, each tensor is its exact value or its bfloat16 rounding as
// user.ckptfs.fidelity says, every torch zip passes zipfile's CRC check,
// exactly the files outside the exact tier are lossy, fsck --deep is clean
// and the daemon logs no error.
func TestRepackTierTorch(t *testing.T) {
	py := venvPython(t) // torch 2.x and safetensors
	m := newMount(t)
	run := m.path("run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "py/tier_check.py", "write", run, "8").CombinedOutput(); err != nil {
		t.Fatalf("write: %v\n%s", err, out)
	}
	if out, err := exec.Command(py, "py/tier_check.py", "check", run).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("before the tier: %v\n%s", err, out)
	}
	// A mounted store is refused: a file open or being read is never
	// re-coded under its reader.
	if out, err := exec.Command(ckptfsBin, "repack", "--store", m.store, "--lossy", "bf16").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "it is mounted") {
		t.Fatalf("repack of a mounted store: %v\n%s", err, out)
	}
	m.stop()
	out, err := exec.Command(ckptfsBin, "repack", "--store", m.store, "--lossy", "bf16", "--exact-newest", "2",
		"--exact-every", "3", "--max-depth", "2", "--json").Output()
	if err != nil {
		t.Fatalf("repack: %v\n%s", err, out)
	}
	var rep struct {
		Lossy        string `json:"lossy"`
		StoredBefore int64  `json:"stored_bytes_before"`
		StoredAfter  int64  `json:"stored_bytes_after"`
		Worst        int    `json:"worst_decodes_after"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("tier: stored %d -> %d bytes, worst decodes %d", rep.StoredBefore, rep.StoredAfter, rep.Worst)
	if rep.Lossy != "bf16" || rep.StoredAfter >= rep.StoredBefore || rep.Worst > 3 {
		t.Errorf("repack report: %s", out)
	}
	if out, err := exec.Command(ckptfsBin, "fsck", "--deep", "--store", m.store).CombinedOutput(); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	m.start()
	out, err = exec.Command(py, "py/tier_check.py", "check", run).CombinedOutput()
	if err != nil {
		t.Fatalf("after the tier: %v\n%s", err, out)
	}
	lossy := strings.Fields(string(out))
	// Of 8 saves, the newest 2 and every 3rd (the 3rd and 6th) stay exact.
	want := []string{"ckpt-00.pt", "ckpt-01.pt", "ckpt-03.pt", "ckpt-04.pt",
		"model-00.safetensors", "model-01.safetensors", "model-03.safetensors", "model-04.safetensors"}
	if !slices.Equal(lossy, want) {
		t.Errorf("lossy files %v, want %v", lossy, want)
	}
	if r := m.stats(); r.LossyFiles != len(want) {
		t.Errorf("stats: lossy_files %d, want %d", r.LossyFiles, len(want))
	}
}

// TestMountTierTorch mounts with a tier the daemon applies by itself
// (--tier bf16 --tier-moments m4: the optimizer's exp_avg at 4 mantissa
// bits, the rest bf16) and saves torch.save and safetensors series into it, one
// file held open from its save on: while open it stays exact, as the files
// its reads decode do; once every pass is done, each file outside the
// newest 2 of its series is lossy unless an exact file is coded against
// it, the held file is tiered after it closed, every file loads with torch
// and safetensors as its mark says, fsck --deep is clean, and the daemon
// logs no error.
func TestMountTierTorch(t *testing.T) {
	py := venvPython(t)
	m := newMount(t, "--tier", "bf16", "--tier-moments", "m4", "--tier-exact-newest", "2", "--tier-interval", "200ms")
	run := m.path("run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	// ckpt-01.pt is open from its save until a pass has tiered the other
	// series (at most 20 s after the last save), and a second more.
	if out, err := exec.Command(py, "py/tier_check.py", "write", run, "8", "1", "20").CombinedOutput(); err != nil {
		t.Fatalf("write, ckpt-01.pt held open: %v\n%s", err, out)
	}
	lossy := map[string]string{} // name -> fidelity
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(py, "py/tier_check.py", "check", run).CombinedOutput()
		if err != nil {
			t.Fatalf("check: %v\n%s", err, out)
		}
		clear(lossy)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if name, fidelity, _ := strings.Cut(line, " "); name != "" {
				lossy[name] = cmp.Or(fidelity, "bf16")
			}
		}
		if lossy["ckpt-01.pt"] != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("lossy: %v", lossy)
	// The torch.save files hold an optimizer's exp_avg: m4 for it.
	for want, fidelity := range map[string]string{"ckpt-00.pt": "bf16+m4", "ckpt-01.pt": "bf16+m4",
		"model-00.safetensors": "bf16", "model-01.safetensors": "bf16"} {
		if lossy[want] != fidelity {
			t.Errorf("%s: %q, want %s", want, lossy[want], fidelity)
		}
	}
	for _, exact := range []string{"ckpt-06.pt", "ckpt-07.pt", "model-06.safetensors", "model-07.safetensors"} {
		if lossy[exact] != "" {
			t.Errorf("%s, among the newest 2, is lossy", exact)
		}
	}
	if r := m.stats(); r.LossyFiles != len(lossy) {
		t.Errorf("stats: lossy_files %d, files found lossy %d", r.LossyFiles, len(lossy))
	}
	m.stop()
	if out, err := exec.Command(ckptfsBin, "fsck", "--deep", "--store", m.store).CombinedOutput(); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
}

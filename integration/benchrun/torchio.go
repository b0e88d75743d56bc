package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
)

// runTorchIOSection times torch.save, torch.load and cp into and out of a
// fresh ckptfs mount beside a plain directory of the same disk, alternately
// in one Python process (integration/py/bench_torchio.py), on real
// checkpoints of more than 100 MB.
func runTorchIOSection(b *bench) error {
	d, err := b.mount("torchio")
	if err != nil {
		return err
	}
	defer func() {
		if d != nil {
			d.unmount()
		}
	}()
	base := filepath.Join(b.tmp, "torchio")
	args := []string{filepath.Join(b.root, "integration/py/bench_torchio.py"), "--mount", d.mnt, "--store", d.store,
		"--plain", filepath.Join(base, "plain"), "--plain2", filepath.Join(base, "plain2"),
		"--outdir", filepath.Join(base, "out"), "--reps", strconv.Itoa(b.reps)}
	sec := &TorchIO{Command: b.display(append([]string{b.python}, args...)...)}
	logf("torch.save/load/cp, %d repetitions", b.reps)
	out, err := b.output(nil, b.python, args...)
	if err != nil {
		return err
	}
	var got struct {
		CheckpointBytes int64                           `json:"checkpoint_bytes"`
		Params          int64                           `json:"parameters"`
		StepsPerSave    int                             `json:"steps_per_save"`
		Identical       bool                            `json:"identical"`
		Times           map[string]map[string][]float64 `json:"times"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("bench_torchio.py output: %w", err)
	}
	if !got.Identical {
		return fmt.Errorf("bench_torchio.py: a checkpoint read back from the mount differs from the plain copy")
	}
	sec.CheckpointBytes, sec.Params, sec.StepsPerSave, sec.Identical = got.CheckpointBytes, got.Params, got.StepsPerSave, got.Identical
	sec.Ops = map[string]*ABTimes{}
	for _, op := range []string{"save", "load", "cp_in", "cp_out"} {
		t := got.Times[op]
		if len(t["mount"]) != b.reps || len(t["plain"]) != b.reps {
			return fmt.Errorf("bench_torchio.py: %s has %d/%d times, want %d", op, len(t["mount"]), len(t["plain"]), b.reps)
		}
		sec.Ops[op] = abTimes(t["mount"], t["plain"], got.CheckpointBytes)
	}
	rep, err := d.report()
	if err != nil {
		return err
	}
	sec.StoreRatio = rep.WrittenVolumeRatio
	sec.DaemonHWM = d.peakRSS()
	err = d.unmount()
	d = nil
	b.res.TorchIO = sec
	return err
}

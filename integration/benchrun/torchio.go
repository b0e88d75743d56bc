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
// checkpoints of more than 100 MB. The saves are also timed into a go-fuse
// loopback that forwards every write through its daemon: what any
// filesystem served that way costs, whatever it does with the bytes.
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
	lb, err := b.startLoopback(filepath.Join(base, "loop-orig"), filepath.Join(base, "loop-mnt"), false)
	if err != nil {
		return err
	}
	defer func() {
		if lb != nil {
			lb.stop()
		}
	}()
	args := []string{filepath.Join(b.root, "integration/py/bench_torchio.py"), "--mount", d.mnt, "--store", d.store,
		"--plain", filepath.Join(base, "plain"), "--plain2", filepath.Join(base, "plain2"),
		"--outdir", filepath.Join(base, "out"), "--fuse", lb.mnt, "--reps", strconv.Itoa(b.reps)}
	sec := &TorchIO{Command: b.display(append([]string{b.python}, args...)...), RefTierMiB: mountRefTierMiB()}
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
		return fmt.Errorf("bench_torchio.py: a checkpoint read back from the mount or the loopback differs from the plain copy")
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
	if f := got.Times["save"]["fuse"]; len(f) != b.reps {
		return fmt.Errorf("bench_torchio.py: %d saves into the loopback, want %d", len(f), b.reps)
	}
	// The loopback in the mount's place: its time against the plain
	// directory's, the same saves.
	sec.Ops["save_loopback"] = abTimes(got.Times["save"]["fuse"], got.Times["save"]["plain"], got.CheckpointBytes)
	rot := got.Times["save_rotated"]
	if len(rot["mount"]) != b.reps || len(rot["plain"]) != b.reps || len(rot["fuse"]) != b.reps {
		return fmt.Errorf("bench_torchio.py: rotated saves %d/%d/%d, want %d", len(rot["mount"]), len(rot["plain"]), len(rot["fuse"]), b.reps)
	}
	sec.Ops["save_rotated"] = abTimes(rot["mount"], rot["plain"], got.CheckpointBytes)
	sec.Ops["save_rotated_loopback"] = abTimes(rot["fuse"], rot["plain"], got.CheckpointBytes)
	if err := lb.stop(); err != nil {
		return err
	}
	lb = nil
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

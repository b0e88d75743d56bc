package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The training of the slowdown measurement: integration/py/trainer.py's MLP
// at width 1024 with Adam (13 MB checkpoints: weights and both moments),
// 60 steps, a checkpoint every 5: a run of about 8 s, short enough for five
// repetitions of three runs, with checkpoints frequent enough that their
// cost stands out of the shared machine's noise.
const (
	trainWidth = 1024
	trainSteps = 60
	trainEvery = 5
)

// runTrainingSection runs the same real training into a fresh ckptfs mount,
// into a plain directory, and without checkpoints, rotating the order each
// repetition, and compares their wall times.
func runTrainingSection(b *bench) error {
	d, err := b.mount("training")
	if err != nil {
		return err
	}
	defer func() {
		if d != nil {
			d.unmount()
		}
	}()
	base := filepath.Join(b.tmp, "training")
	script := filepath.Join(b.root, "integration/py/trainer.py")
	args := func(out string, every int) []string {
		return []string{script, "--out", out, "--steps", strconv.Itoa(trainSteps), "--every", strconv.Itoa(every),
			"--width", strconv.Itoa(trainWidth)}
	}
	sec := &Training{Command: b.display(append([]string{b.python}, args("OUT", trainEvery)...)...) +
		"  (OUT in the mount, OUT in a plain directory, and with --every " + strconv.Itoa(10*trainSteps) + ": no checkpoints)",
		Checkpoints: trainSteps / trainEvery}
	kinds := []string{"mount", "plain", "none"}
	times := map[string]*[]float64{"mount": &sec.Mount, "plain": &sec.Plain, "none": &sec.None}
	for r := 0; r < b.reps; r++ {
		run := "run-" + string(rune('a'+r)) // letters: each run is a family of its own
		for i := range kinds {
			kind := kinds[(i+r)%len(kinds)]
			out, every := filepath.Join(base, kind, run), trainEvery
			switch kind {
			case "mount":
				out = filepath.Join(d.mnt, run)
			case "none":
				every = 10 * trainSteps
			}
			t0 := time.Now()
			if _, err := b.output(nil, b.python, args(out, every)...); err != nil {
				return err
			}
			*times[kind] = append(*times[kind], since(t0))
		}
		logf("training repetition %d: mount %.1f s, plain %.1f s, none %.1f s", r, sec.Mount[r], sec.Plain[r], sec.None[r])
	}
	sec.MountMed, sec.PlainMed, sec.NoneMed = median(sec.Mount), median(sec.Plain), median(sec.None)
	var ratios, diffs []float64
	for i := range sec.Mount {
		ratios = append(ratios, sec.Mount[i]/sec.Plain[i])
		diffs = append(diffs, sec.Mount[i]-sec.Plain[i])
	}
	sec.Slowdown = median(ratios) - 1
	sec.PerCheckpoint = median(diffs) / float64(sec.Checkpoints)
	ckpts, _ := filepath.Glob(filepath.Join(base, "plain", "run-a", "ckpt-*.pt"))
	if len(ckpts) != sec.Checkpoints {
		return fmt.Errorf("trainer.py wrote %d checkpoints into the plain directory, want %d", len(ckpts), sec.Checkpoints)
	}
	if fi, err := os.Stat(ckpts[0]); err == nil {
		sec.CheckpointBytes = fi.Size()
	}
	rep, err := d.report()
	if err != nil {
		return err
	}
	sec.StoreRatio = rep.WrittenVolumeRatio
	if rep.LogicalBytes > 0 {
		sec.StoredOverLog = float64(rep.StoredBytes) / float64(rep.LogicalBytes)
	}
	if err := d.unmount(); err != nil {
		return err
	}
	store := d.store
	d = nil
	sec.Plots, err = b.drawReport([]string{"--store", store}, "bin/ckptfs report --store STORE --out DIR", "training-store-",
		[]string{"stored_vs_logical.png", "chain_depth.png"})
	if err != nil {
		return err
	}
	for i := range sec.Plots {
		sec.Plots[i].Command = "after the training runs, their mount's STORE: " + sec.Plots[i].Command
	}
	b.res.Training = sec
	return os.RemoveAll(base)
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// save1gPause is the pause before each timed save of the save1g section
// (--save1g-pause): long enough for a virtual machine's guest to hand the
// memory a delete freed back to its host (free page reporting), so that
// every target's save writes into memory in the same state
// (bench_save1g.py). Reporting starts 2 s after a free but takes longer
// to finish: at 6 s on a 2-core machine, the plain directory's save took
// 0.79 s against the mount's 1.82 s, reusing pages not yet handed back;
// at 20 s in the same run, 2.25 s against 2.18 s. The many-core device
// runs keep 6 s (device.sh), as their figures were measured.
var save1gPause float64 = 20

// save1gTargets are the directories of the save1g section, in the order
// of the first repetition; the last is the plain directory ratios are
// taken against.
var save1gTargets = []string{"passthrough", "daemon-written", "loopback-passthrough", "plain"}

// Save1G is torch.save of a ~1 GiB training state into a ckptfs mount in
// each save mode, a go-fuse passthrough loopback (the floor of a FUSE
// filesystem) and a plain directory, side by side; and the time until the
// save is durable (fsync).
type Save1G struct {
	Command         string  `json:"command"`
	CheckpointBytes int64   `json:"checkpoint_bytes"`
	PauseSeconds    float64 `json:"pause_s"`
	// Per target (save1gTargets): the samples and medians, and the
	// ratios of the medians to the plain directory's.
	Targets map[string]*Save1GTarget `json:"targets"`
	// Without the pause: each save follows the delete of the previous one
	// at once, so a page cache that freed memory reuses it.
	NoPause map[string]*Save1GTarget `json:"no_pause"`
	// The mounts' written_volume_ratio after the run, per save mode.
	StoreRatio map[string]float64 `json:"written_volume_ratio"`
	DaemonHWM  map[string]int64   `json:"daemon_peak_rss"`
}

// Save1GTarget is one target's times.
type Save1GTarget struct {
	Save          []float64 `json:"save_s"`
	Durable       []float64 `json:"durable_s"`
	SaveMed       float64   `json:"save_median_s"`
	DurableMed    float64   `json:"durable_median_s"`
	SaveRatio     float64   `json:"save_ratio"`
	DurableRatio  float64   `json:"durable_ratio"`
	SaveMBs       float64   `json:"save_mb_s"`
	DurableMBs    float64   `json:"durable_mb_s"`
	BytesPerSaved int64     `json:"bytes"`
}

// runSave1GSection runs bench_save1g.py into a passthrough mount, a
// daemon-written mount (--no-passthrough), a passthrough loopback and a
// plain directory, with the pause and then without it.
func runSave1GSection(b *bench) error {
	py := venvPython()
	if _, err := os.Stat(py); err != nil {
		return fmt.Errorf("the writers' venv (make deps): %w", err)
	}
	base := filepath.Join(b.tmp, "save1g")
	plain := filepath.Join(base, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		return err
	}
	pt, err := b.mount("save1g-pt")
	if err != nil {
		return err
	}
	dw, err := b.mount("save1g-dw", "--no-passthrough")
	if err != nil {
		pt.unmount()
		return err
	}
	lb, err := b.startLoopback(filepath.Join(base, "loop-orig"), filepath.Join(base, "loop-mnt"), true)
	if err != nil {
		pt.unmount()
		dw.unmount()
		return err
	}
	dirs := map[string]string{"passthrough": pt.mnt, "daemon-written": dw.mnt, "loopback-passthrough": lb.mnt, "plain": plain}
	sec := &Save1G{PauseSeconds: save1gPause, StoreRatio: map[string]float64{}, DaemonHWM: map[string]int64{}}
	run := func(pause float64) (map[string]*Save1GTarget, error) {
		args := []string{filepath.Join(b.root, "integration/py/bench_save1g.py"), "--reps", strconv.Itoa(b.reps),
			"--pause", strconv.FormatFloat(pause, 'f', -1, 64)}
		for _, t := range save1gTargets {
			args = append(args, t+"="+dirs[t])
		}
		if pause > 0 {
			sec.Command = b.display(append([]string{py}, args...)...)
		}
		logf("torch.save of 1 GiB, pause %.0f s, %d repetitions", pause, b.reps)
		out, err := b.output(nil, py, args...)
		if err != nil {
			return nil, err
		}
		var got struct {
			Bytes     int64                           `json:"checkpoint_bytes"`
			Identical bool                            `json:"identical"`
			Times     map[string]map[string][]float64 `json:"times"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			return nil, fmt.Errorf("bench_save1g.py output: %w", err)
		}
		if !got.Identical {
			return nil, errors.New("bench_save1g.py: a checkpoint read back differs from the first target's")
		}
		sec.CheckpointBytes = got.Bytes
		res := map[string]*Save1GTarget{}
		for _, t := range save1gTargets {
			tm := got.Times[t]
			if len(tm["save"]) != b.reps || len(tm["durable"]) != b.reps {
				return nil, fmt.Errorf("bench_save1g.py: %s has %d saves, want %d", t, len(tm["save"]), b.reps)
			}
			res[t] = &Save1GTarget{Save: tm["save"], Durable: tm["durable"], SaveMed: median(tm["save"]),
				DurableMed: median(tm["durable"]), BytesPerSaved: got.Bytes}
		}
		p := res["plain"]
		for _, r := range res {
			r.SaveRatio, r.DurableRatio = r.SaveMed/p.SaveMed, r.DurableMed/p.DurableMed
			r.SaveMBs, r.DurableMBs = mbps(got.Bytes, r.SaveMed), mbps(got.Bytes, r.DurableMed)
		}
		return res, nil
	}
	if sec.Targets, err = run(save1gPause); err == nil {
		sec.NoPause, err = run(0)
	}
	for name, d := range map[string]*daemon{"passthrough": pt, "daemon-written": dw} {
		if err == nil {
			rep, rerr := d.report()
			if err = rerr; err == nil {
				sec.StoreRatio[name] = rep.WrittenVolumeRatio
			}
		}
		sec.DaemonHWM[name] = d.peakRSS()
	}
	if e := errors.Join(lb.stop(), pt.unmount(), dw.unmount()); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	b.res.Save1G = sec
	return os.RemoveAll(base)
}

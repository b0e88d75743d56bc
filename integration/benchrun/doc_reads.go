package main

import (
	"fmt"

	"github.com/ckptfs/ckptfs/chain"
)

func readsDoc(w *docWriter, r *Reads) {
	w.line("## 8. Reads")
	w.line("")
	w.f("The training of section 4 saves %s checkpoints into a fresh mount (default policy) and into a plain directory of the same disk, each as a `torch.save` file and as a safetensors file of the same tensors (%s); the pairs were byte-identical, and the deepest pair's tensors equal through mappings (torch.load(mmap=True), safe_open): %v. Then, alternately (the order swapped each repetition), each read is timed cold: the file, and for the mount every file of its store, written back and dropped from the page cache first and the daemon's rebuilt chunks dropped through `.ckptfs/drop_caches` (its reference tier, %d MiB by default here, keeps the newest save of each series). The reads are of the deepest save the default policy made (chain depth %d for the `.pt` files, %d for the safetensors files: %d and %d decodes per chunk), except `verify`, which copies out the save just written, as a script's check does. `torch.load(mmap=True)` and `safe_open` map the file: every tensor is summed, so every page is read. The mount's kernel read-ahead is %d KiB (raised from 128 KiB at mount). Python: `%s`.\n\n",
		mibs(r.CheckpointBytes), mibs(r.SafetensorsBytes), r.Identical, chain.AutoCacheBytes()/8*7>>20,
		r.Deepest, r.DeepestSafetensors, r.Deepest+1, r.DeepestSafetensors+1, r.ReadAheadKiB, r.Python)
	w.header("operation", "mount (median s)", "plain (median s)", "mount ÷ plain", "mount MB/s", "plain MB/s", "mount samples (s)", "plain samples (s)")
	names := map[string]string{"load": "torch.load", "load_mmap": "torch.load(mmap=True)", "safe_open": "safe_open, every tensor", "cp_out": "cp out", "verify": "cp out of the newest (verify)"}
	for _, op := range []string{"load", "load_mmap", "safe_open", "cp_out", "verify"} {
		a := r.Ops[op]
		if a == nil {
			continue
		}
		w.row(names[op], f2(a.MountMed), f2(a.PlainMed), "**"+f2(a.Ratio)+"**", fmt.Sprintf("%.0f", a.MountMBs), fmt.Sprintf("%.0f", a.PlainMBs), secs(a.Mount), secs(a.Plain))
	}
	w.line("")
	w.f("Daemon peak RSS: %s.\n\n", mibs(r.DaemonHWM))
	w.cmd(r.Command)
	w.f("**Read time against chain depth.** A second fresh mount with `--snap-dis %d` (so save k is coded at depth k) and %d saves of the `.pt` file; each save is copied out cold beside its plain copy. A chunk at depth d costs d+1 decodes. The newest save is served from the reference tier without decoding.\n\n", depthSaves, depthSaves)
	w.header("chain depth", "decodes per chunk", "mount (median s)", "plain (median s)", "mount ÷ plain", "mount MB/s", "mount samples (s)", "plain samples (s)")
	for _, d := range r.Depth {
		dec := fmt.Sprint(d.Depth + 1)
		if d.Newest {
			dec = "0 (newest)"
		}
		w.row(fmt.Sprint(d.Depth), dec, f2(d.MountMed), f2(d.PlainMed), f2(d.Ratio), fmt.Sprintf("%.0f", d.MountMBs), secs(d.Mount), secs(d.Plain))
	}
	w.line("")
	w.cmd(r.DepthCommand)
	w.line("**What a bound on depth costs in writes.** Each training series replayed under `--snap-dis auto --max-depth k` (k = 0: `--snap-dis 1`, every save a baseline); decodes per chunk to read a save are its depth + 1 (the maximum and the mean over the series' saves).")
	w.line("")
	w.header("series", "max depth", "decodes per chunk (max)", "decodes per chunk (mean)", "written_volume_ratio")
	for _, c := range r.WriteCost {
		w.row(c.Series, fmt.Sprint(c.MaxDepth), fmt.Sprint(c.MaxDecodes), fmt.Sprintf("%.1f", c.MeanDecodes), f3(c.WrittenVolumeRatio))
	}
	w.line("")
	w.cmd("bin/ckptfs replay --json --quiet --snap-dis auto --max-depth K .cache/series/SET/ckpt-*.pt")
}

// readGoal is issue 17's bound on a cold read out of the mount ÷ plain.
const readGoal = 1.5

func readsHeadline(w *docWriter, r *Reads) {
	ratio := func(op string) string {
		if a := r.Ops[op]; a != nil {
			return f2(a.Ratio) + "×"
		}
		return "-"
	}
	met := true
	for _, op := range []string{"load", "load_mmap", "safe_open", "cp_out"} {
		met = met && r.Ops[op] != nil && r.Ops[op].Ratio <= readGoal
	}
	w.f("- **Cold reads** (%s checkpoint at chain depth %d, the deepest the default policy made; mount ÷ plain directory, medians of %d): torch.load %s, torch.load(mmap=True) %s, safe_open of every tensor %s, cp out %s (goal ≤ %.1f×: %s; decoding is the bound, see [READS.md](READS.md)); cp out of the save just written %s.\n",
		mibs(r.CheckpointBytes), r.Deepest, len(r.Ops["cp_out"].Mount), ratio("load"), ratio("load_mmap"), ratio("safe_open"), ratio("cp_out"), readGoal, verdict(met), ratio("verify"))
}

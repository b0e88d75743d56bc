package main

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/chain"
)

func replayDoc(w *docWriter, s *ReplaySection) {
	w.line("## 1. Write volume and erases (the paper's Fig. 9 and Fig. 10)")
	w.line("")
	w.line("The real training series of `make series` (10 consecutive checkpoints each, one per epoch, `torch.save` files of")
	w.line("about 8 MB holding the model and the optimizer state) are replayed with `ckptfs replay --compare`: the paper's seven")
	w.line("methods and ckptfs's `planes` codec under both schemes, each on a fresh simulated SSD warmed up to the paper's Table 8")
	w.line("state (`--precondition paper`: 85% valid, 10% stale, 5% free blocks), every file read back and checked byte for byte.")
	w.line("`written_volume_ratio` is the host pages a method wrote ÷ the host pages a plain filesystem wrote for the same saves")
	w.line("(the shadow device beside it); `erase_ratio` the same for block erases. Lower is better; `complete` is the plain")
	w.line("file plus ckptfs's metadata, hence slightly above 1.")
	w.line("")
	w.f("**Device.** Fig. 9 and Fig. 10 use the paper's SSD geometry with fewer blocks (`--device-size %s`). ", s.DeviceSize)
	if p := s.PaperDevice; p != nil && len(p.Methods) > 0 {
		var erases []string
		for _, m := range p.Methods {
			erases = append(erases, fmt.Sprintf("%s %d (%s)", m.Method, m.DeviceErases, ratioOrDash(m.EraseRatio)))
		}
		w.f("On the paper's full 32 GiB device, preconditioned the same way, a series (80 MB) is small beside the stale and free space Table 8 leaves; the garbage collector cleans only when free blocks fall under its reserve, so the erases of one series are few: %s, against %d for the plain filesystem (command: `%s`). ",
			strings.Join(erases, ", "), p.Methods[0].ShadowErases, p.Command)
	}
	w.line("On the smaller device the series outgrows that space many times over and each method's erases rest on more garbage")
	w.line("collection cycles, as in the paper's runs of hours. The written volumes do not depend on the device size. Erase counts are coarse (the garbage collector")
	w.line("reclaims several blocks per run, mostly in steps of 8 here), so methods a few pages apart can differ by 0 or 8 erases.")
	w.line("")
	w.line("### Fig. 9: written_volume_ratio per method and snap_dis")
	w.line("")
	for _, set := range append(append([]string{}, seriesSets...), "adam-stream") {
		compareTable(w, s, set, func(m *MethodResult) string { return f3(m.WrittenVolumeRatio) })
	}
	w.line("### Fig. 10: erases per method and snap_dis (erase_ratio in brackets)")
	w.line("")
	for _, set := range append(append([]string{}, seriesSets...), "adam-stream") {
		compareTable(w, s, set, func(m *MethodResult) string {
			return fmt.Sprintf("%d (%s)", m.DeviceErases, ratioOrDash(m.EraseRatio))
		})
	}
	if tl := s.Timeline; tl != nil {
		w.f("The per-checkpoint erase chart below comes from replaying the first 1, 2, ..., 10 files of %s at snap_dis %s (replay reports totals only); the replay of all 10 erased exactly what the full run did for every method: %v.\n\n",
			seriesName(tl.Series), tl.SnapDis, tl.Consistent)
	}
	plots(w, s.Plots)
	w.line("## 2. Useful storage, save and restore time per checkpoint (the paper's Table 9)")
	w.line("")
	w.line("`--keep latest --snap-dis 5`: after each save the older files are deleted, as the paper's Algorithm 2 does, so")
	w.line("what stays is what the latest checkpoint needs (its baseline and, for the progressive scheme, the deltas between).")
	w.line("Useful storage is in 4 KiB pages; save and restore are the simulated device's time (ms) to write the file and to read")
	w.line("back everything needed to rebuild it, on the paper's 32 GiB device after the Table 8 warm-up.")
	w.line("")
	for _, run := range s.Table9 {
		table9(w, &run)
	}
}

// compareTable is one series' methods × snap_dis table.
func compareTable(w *docWriter, s *ReplaySection, set string, cell func(*MethodResult) string) {
	var runs []*CompareRun
	var cols []string
	for _, sd := range snapDises {
		if r := s.run(set, sd); r != nil {
			runs = append(runs, r)
			cols = append(cols, "snap_dis "+sd)
		}
	}
	if len(runs) == 0 {
		return
	}
	w.f("**%s** (%d checkpoints, %s written by a plain filesystem, %d plain erases)\n\n", seriesName(set), runs[0].Files,
		mibs(runs[0].Methods[0].ShadowBytes), runs[0].Methods[0].ShadowErases)
	w.header(append([]string{"method"}, cols...)...)
	for _, m := range runs[0].Methods {
		cells := []string{m.Method}
		for _, r := range runs {
			if mm := r.method(m.Method); mm != nil {
				cells = append(cells, cell(mm))
			} else {
				cells = append(cells, "-")
			}
		}
		w.row(cells...)
	}
	w.line("")
	w.cmd(strings.Replace(runs[0].Command, "--snap-dis "+runs[0].SnapDis, "--snap-dis N", 1))
}

func table9(w *docWriter, run *CompareRun) {
	pr, ch := run.method("planes_pr"), run.method("planes_ch")
	dpr, dch := run.method("DynRLE_pr"), run.method("DynRLE_ch")
	if pr == nil || ch == nil || dpr == nil || dch == nil {
		return
	}
	w.f("**%s**\n\n", seriesName(run.Series))
	w.header("checkpoint", "planes_pr useful", "save ms", "restore ms", "planes_ch useful", "save ms", "restore ms", "DynRLE_pr useful", "DynRLE_ch useful")
	for i, st := range pr.Steps {
		c, d1, d2 := ch.Steps[i], dpr.Steps[i], dch.Steps[i]
		w.row(st.Path, fmt.Sprint(st.UsefulPages), fmt.Sprintf("%.1f", st.SaveMs), fmt.Sprintf("%.1f", st.RestoreMs),
			fmt.Sprint(c.UsefulPages), fmt.Sprintf("%.1f", c.SaveMs), fmt.Sprintf("%.1f", c.RestoreMs),
			fmt.Sprint(d1.UsefulPages), fmt.Sprint(d2.UsefulPages))
	}
	w.line("")
	w.cmd(run.Command)
}

// plots shows charts, naming the commands that made them once for each run
// of charts that share them (each chart is DIR/<name> of that command).
func plots(w *docWriter, ps []Plot) {
	for i, p := range ps {
		if i == 0 || ps[i-1].Command != p.Command {
			w.f("Charts made by: `%s` (each chart is a PNG in DIR)\n\n", p.Command)
		}
		w.f("![%s](%s)\n*%s*\n\n", p.Title, p.File, p.Title)
	}
}

func codecDoc(w *docWriter, c *CodecSection) {
	w.line("## 3. Codec throughput")
	w.line("")
	w.line("From the encode package's own measurements on the same series. The table is `TestReportRatios`: coded size ÷")
	w.line("plain size (chunk headers included) and MB/s on **one core** (thread CPU time, best of five rounds; `delta` codes")
	w.line("checkpoint k against k−1, `base` the first checkpoint alone).")
	w.line("")
	w.header("codec", "data", "kind", "ratio", "encode MB/s", "decode MB/s", "size vs dynrle")
	for _, r := range c.Rows {
		w.row(r.Codec, r.Data, r.Kind, fmt.Sprintf("%.4f", r.Ratio), fmt.Sprintf("%.0f", r.EncMBs), fmt.Sprintf("%.0f", r.DecMBs), r.VsDynRLE)
	}
	w.line("")
	w.cmd(c.ReportCommand)
	w.line("**All cores**: `BenchmarkPipeline` encodes (planes) and decodes the fp32+Adam delta chunks through the ordered")
	w.line("pipeline the store uses, with 1 and 2 workers; MB/s is wall clock, median of 5 samples.")
	w.line("")
	w.header("operation", "workers", "median MB/s", "samples")
	for _, p := range c.Pipeline {
		op := map[string]string{"enc": "encode", "dec": "decode"}[p.Op]
		w.row(op, fmt.Sprint(p.Workers), fmt.Sprintf("%.0f", p.MedianMBs), joinF(p.Samples, "%.0f"))
	}
	w.line("")
	w.cmd(c.PipelineCommand)
}

func mountDoc(w *docWriter, r *Results) {
	w.line("## 4. Mount throughput and latency")
	w.line("")
	if t := r.TorchIO; t != nil {
		w.f("A real training (a bag-of-words classifier: an EmbeddingBag and two linear layers, %.1f M parameters, Adam) saves a checkpoint of %s (weights and both Adam moments) every %d steps, with `torch.save` into a fresh ckptfs mount and into a plain directory on the same disk, alternately (the order swapped each time). Then each checkpoint is loaded with `torch.load` from both, and copied in (`cp` from a plain file into the mount, beside `cp` into a second plain directory) and out (`cp` from the mount, beside `cp` from the plain directory, into a plain directory). Every read is cold: the file, and for the mount every file of its store, is written back and dropped from the page cache first, and the daemon's rebuilt chunks dropped through `.ckptfs/drop_caches` (its reference tier, %d MiB by default here, keeps the newest save of each series). The files in the mount were byte-identical to the plain ones: %v. Writes are timed until `close` returns (no fsync on either side; ckptfs's bytes are in the page cache by then, in the file's staging file, and the commit follows in the background; the reads that follow wait for it); each repetition's saves start as a training's next save would, minutes later: the previous ones committed (fsync of the mount's root) and written back to the disk (`sync`). Every checkpoint is kept, so every side's page cache takes, for each save, memory this virtual machine has not used lately (or has handed back to its host: free page reporting), whose first write costs about 1-2.3 ms per MiB here; the table after this one has saves that delete the previous checkpoint first, and section 10 has 1 GiB saves with that effect controlled.\n\n",
			float64(t.Params)/1e6, mibs(t.CheckpointBytes), t.StepsPerSave, chain.AutoCacheBytes()/8*7>>20, t.Identical)
		w.header("operation", "mount (median s)", "plain (median s)", "mount ÷ plain", "mount MB/s", "plain MB/s", "mount samples (s)", "plain samples (s)")
		for _, op := range []string{"save", "load", "cp_in", "cp_out"} {
			a := t.Ops[op]
			name := map[string]string{"save": "torch.save", "load": "torch.load", "cp_in": "cp into", "cp_out": "cp out of"}[op]
			w.row(name, f2(a.MountMed), f2(a.PlainMed), "**"+f2(a.Ratio)+"**", fmt.Sprintf("%.0f", a.MountMBs), fmt.Sprintf("%.0f", a.PlainMBs), secs(a.Mount), secs(a.Plain))
		}
		w.line("")
		if l := t.Ops["save_loopback"]; l != nil {
			w.f("The same saves were also timed, in turn with the other two, into a go-fuse loopback mount (`benchrun loopback`, the mount options ckptfs uses) that forwards every write through its daemon, as ckptfs is served, and does nothing else with the bytes: median %s s (samples %s), %s× the plain directory. ckptfs ÷ that loopback: **%s**. With FUSE passthrough (the default where the kernel allows it) ckptfs's daemon sees none of the writes either; section 10 compares ckptfs with a passthrough loopback.\n\n",
				f2(l.MountMed), secs(l.Mount), f2(l.Ratio), f2(t.Ops["save"].MountMed/l.MountMed))
		}
		if m, l := t.Ops["save_rotated"], t.Ops["save_rotated_loopback"]; m != nil && l != nil {
			w.f("**Saves that keep one checkpoint.** %d more saves of the same training, each side's previous checkpoint deleted just before the next save (as a training that keeps one), so that the plain directory's page cache reuses the memory it has just freed (ckptfs's staging file of the previous save was deleted at its commit, long before: its page cache has nothing to reuse):\n\n", len(m.Mount))
			w.header("into", "median s", "÷ plain", "samples (s)")
			w.row("ckptfs", f2(m.MountMed), "**"+f2(m.Ratio)+"**", secs(m.Mount))
			w.row("the forwarding loopback", f2(l.MountMed), f2(l.Ratio), secs(l.Mount))
			w.row("plain directory", f2(m.PlainMed), "1", secs(m.Plain))
			w.line("")
			w.f("ckptfs ÷ the forwarding loopback: %s.\n\n", f2(m.MountMed/l.MountMed))
		}
		w.f("The mount's written_volume_ratio over these saves and copies: %s; daemon peak RSS %s.\n\n", f3(t.StoreRatio), mibs(t.DaemonHWM))
		w.cmd(t.Command)
	}
	if q := r.SeqIO; q != nil {
		w.f("**Sequential I/O.** A %s float32 `.npy` file (synthetic, each repetition a new version 0.1%% away from the last, so ckptfs codes it as a delta) is written in 1 MiB calls and read back cold in 1 MiB calls through ckptfs; through go-fuse's loopback filesystem (`fs.NewLoopbackRoot`, served by `benchrun loopback` with the mount options ckptfs uses) over a directory of the same disk, twice: *loopback* forwards every read and write through its daemon, as ckptfs is served, and *passthrough* hands the kernel each open file's backing file (FUSE passthrough), so that reads and writes never reach its daemon; and in a plain directory of that disk, the order rotating each repetition. Reads were checked against what was written. The virtual disk is served from the host's cache, so cold reads of the plain directory and through the loopbacks run at GB/s and vary widely with the load. Through ckptfs the file is written into its staging file (with passthrough, by the kernel) and read back after its commit: the file read is the one just written, which the daemon's reference tier holds whole (its read cache is dropped through `.ckptfs/drop_caches`): no chunk is decoded, as in a save's verify step; section 8 has reads that decode.\n\n", mibs(q.FileBytes))
		w.header("target", "write MB/s (median)", "read MB/s (median)", "write samples (s)", "read samples (s)")
		for _, name := range []string{"ckptfs", "loopback", "passthrough", "plain"} {
			if t := q.Targets[name]; t != nil {
				w.row(name, fmt.Sprintf("%.0f", t.WriteMBs), fmt.Sprintf("%.0f", t.ReadMBs), secs(t.Write), secs(t.Read))
			}
		}
		w.line("")
		if c, l := q.Targets["ckptfs"], q.Targets["loopback"]; l != nil && l.WriteMBs > 0 && l.ReadMBs > 0 {
			w.f("ckptfs ÷ the forwarding loopback: write %s, read %s. ckptfs daemon peak RSS: %s.\n\n", f2(c.WriteMBs/l.WriteMBs), f2(c.ReadMBs/l.ReadMBs), mibs(c.DaemonHWM))
		}
		w.cmd("go run ./integration/benchrun --only seqio  (integration/benchrun/seqio.go; " + q.Order + ")")
	}
}

func trainingDoc(w *docWriter, t *Training) {
	w.line("## 5. Training slowdown")
	w.line("")
	w.f("integration/py/trainer.py trains its MLP (width %d, Adam, one thread) for %d steps and saves `{'model', 'optimizer', 'scheduler', 'step'}` (%s) with `torch.save` every %d steps: %d checkpoints per run, into a fresh ckptfs mount, into a plain directory, and, for reference, not at all; the three runs rotate order each repetition.\n\n",
		trainWidth, trainSteps, mibs(t.CheckpointBytes), trainEvery, t.Checkpoints)
	w.header("", "into the mount", "into a plain directory", "no checkpoints")
	w.row("median wall time (s)", fmt.Sprintf("%.2f", t.MountMed), fmt.Sprintf("%.2f", t.PlainMed), fmt.Sprintf("%.2f", t.NoneMed))
	w.row("samples (s)", secs(t.Mount), secs(t.Plain), secs(t.None))
	w.line("")
	w.f("Slowdown into the mount: **%s** (the median over repetitions of mount ÷ plain − 1; the two runs of a repetition are adjacent in time and share the machine's load), or %s more per %s checkpoint (median of mount − plain over %d checkpoints). The runs without checkpoints took %.2f s: a plain directory added %.2f s of checkpointing per run, the mount %.2f s (differences of medians, at the mercy of the noise). The mount's written_volume_ratio over all runs: %s; stored ÷ logical bytes: %s.\n\n",
		pct(t.Slowdown), fmt.Sprintf("%.3f s", t.PerCheckpoint), mibs(t.CheckpointBytes), t.Checkpoints, t.NoneMed, t.PlainMed-t.NoneMed, t.MountMed-t.NoneMed, f3(t.StoreRatio), f3(t.StoredOverLog))
	w.cmd(t.Command)
	w.line("The store of those runs (each run is a family of its own; a store keeps no per-save history, so the chart shows each")
	w.line("file's stored size beside its logical size):")
	w.line("")
	plots(w, t.Plots)
}

func scaleDoc(w *docWriter, s *Scale) {
	w.line("## 6. Scale: file size, concurrent writers, memory")
	w.line("")
	w.f("Synthetic checkpoints (%s), generated into a scratch directory on the same disk and removed afterwards. For each size, a fresh mount; `cp` of version 0 (a baseline), then of version 1 (coded as a delta against it) into one directory of the mount; then version 1 read back cold (its CRC-32C checked against the source). Peak RSS is the daemon's VmHWM from /proc/PID/status before unmounting. The daemon idles at %s.\n\n",
		s.Generator, mibs(s.IdleHWM))
	w.header("size", "ingest baseline (s)", "MB/s", "ingest delta (s)", "MB/s", "read (s)", "MB/s", "plain cp (s)", "MB/s", "delta stored ÷ size", "daemon peak RSS")
	for _, r := range s.Sizes {
		w.row(mibs(r.Bytes), f2(r.BaseS), fmt.Sprintf("%.0f", r.BaseMBs), f2(r.DeltaS), fmt.Sprintf("%.0f", r.DeltaMBs),
			f2(r.ReadS), fmt.Sprintf("%.0f", r.ReadMBs), f2(r.PlainS), fmt.Sprintf("%.0f", r.PlainMBs), f3(r.StoredRatio), mibs(r.DaemonHWM))
	}
	w.line("")
	w.line("\"plain cp\" copies the same delta file into a plain directory of the disk, after the mount's copies, for reference;")
	w.line("it returns once the bytes are in the page cache, which this machine's memory holds whole even at 4 GiB. This")
	w.line("virtual disk is itself served from the host's cache: cold reads from it ran at several GB/s.")
	w.line("")
	if n := len(s.Sizes); n >= 2 {
		a, b := s.Sizes[0], s.Sizes[n-1]
		perGiB := func(f func(ScaleRow) float64) string {
			var v []string
			for _, r := range s.Sizes {
				v = append(v, fmt.Sprintf("%.1f", f(r)/(float64(r.Bytes)/(1<<30))))
			}
			return strings.Join(v, ", ")
		}
		w.f("Seconds per GiB at %s: ingest %s (baseline), %s (delta), read %s. Daemon peak RSS %s → %s. Single runs, not medians: the %s case alone moves %s through the disk, and the smallest size carries the fixed costs of opening and committing a file.\n\n",
			sizesList(s.Sizes), perGiB(func(r ScaleRow) float64 { return r.BaseS }), perGiB(func(r ScaleRow) float64 { return r.DeltaS }),
			perGiB(func(r ScaleRow) float64 { return r.ReadS }), mibs(a.DaemonHWM), mibs(b.DaemonHWM), mibs(b.Bytes), mibs(4*b.Bytes))
	}
	w.cmd("go run ./integration/benchrun --only scale  (integration/benchrun/scale.go: bin/ckptfs mount --store STORE MNT; cp BIG-0.npy BIG-1.npy MNT/big/...)")
	if len(s.Writers) > 0 {
		w.f("**Concurrent writers**: n `cp` processes at once, each copying its own %s baseline and then its delta into a directory (a family) of its own, in a fresh mount.\n\n", mibs(s.Writers[0].FileBytes))
		w.header("writers", "wall time (s)", "aggregate MB/s", "daemon peak RSS", "verified")
		for _, r := range s.Writers {
			w.row(fmt.Sprint(r.Writers), f2(r.WallS), fmt.Sprintf("%.0f", r.AggMBs), mibs(r.DaemonHWM), fmt.Sprint(r.Verified))
		}
		w.line("")
	}
	if r := s.Replay; r != nil {
		var rss []string
		for _, x := range r.RSS {
			rss = append(rss, mibs(x))
		}
		w.f("**`ckptfs replay` memory** on two %s synthetic checkpoints (a baseline and a delta, each verified byte for byte after saving), %d runs: peak RSS %s, the larger **%s** (issue 5 requires < %s: %s); %s s; written_volume_ratio %s.\n\n",
			mibs(r.FileBytes), len(r.RSS), strings.Join(rss, " and "), mibs(r.MaxRSS), mibs(s.Limits.ReplayMaxRSS), verdict(r.MaxRSS < s.Limits.ReplayMaxRSS),
			joinF(r.Seconds, "%.0f"), f3(r.Ratio))
		w.cmd(r.Command)
	}
	if n := len(s.Sizes); n > 0 {
		b := s.Sizes[n-1]
		w.f("**Daemon memory** while a %s file was written (twice) and read, mounted with `%s` (the memory of a small machine; the defaults follow the machine's RAM, and take a few GB here: README, Memory): peak RSS **%s** (issue 6 requires ≤ %s: %s).\n\n",
			mibs(b.Bytes), strings.Join(scaleMountFlags, " "), mibs(b.DaemonHWM), mibs(s.Limits.DaemonMaxRSS), verdict(b.DaemonHWM <= s.Limits.DaemonMaxRSS))
	}
}

func sizesList(rows []ScaleRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, mibs(r.Bytes))
	}
	return strings.Join(s, ", ")
}

package main

import (
	"fmt"
	"slices"
	"strings"
)

// renderDoc writes docs/BENCHMARKS.md from the results: headline figures
// first, then one part per section, each naming the command behind it.
func renderDoc(r *Results) string {
	var w docWriter
	w.line("# Benchmarks")
	w.line("")
	w.line("Written by `make bench` (`go run ./integration/benchrun --bin bin/ckptfs --out docs`), which also writes")
	w.line("[benchmarks.json](benchmarks.json) (every figure below, the samples behind each median, and the")
	w.line("command that produced it) and the charts in [img/](img/). Do not edit by hand: rerun `make bench`.")
	w.line("")
	m := r.Machine
	w.f("Measured at commit `%s` on %s. **Machine**: %d cores (%s), %.0f GiB memory, Linux %s, %s, torch %s; scratch files and stores on `%s`.\n",
		r.Commit, r.Generated, m.NProc, m.CPU, float64(m.MemTotal)/(1<<30), m.Kernel, m.Go, m.Torch, m.Disk)
	w.f("The machine is **shared with other agents** (builds, tests, fuzzing): the 1-minute load average was %.1f when the run started and %.1f when it ended, on %d cores, so wall-clock figures are noisy. ",
		m.LoadAvgStart, m.LoadAvgEnd, m.NProc)
	w.line("Every ratio below is measured side by side in one run, alternating the two sides (A/B, the order swapped each")
	w.line("repetition), and timed figures are medians of 5 repetitions; the samples are in benchmarks.json. The write volume")
	w.line("and erase figures count pages on a simulated SSD and are exact and repeatable.")
	if m.WarmedMiB > 0 {
		w.f("Before anything was timed, %d MiB of free memory were written once (%.1f s): on a virtual machine the first write to\n", m.WarmedMiB, m.WarmSeconds)
		w.line("memory costs about 2.3 ms per MiB, which no side of a comparison should pay (warm.go). Writes still swing between runs: the guest")
		w.line("hands memory it frees back to the host after about 2 s (free page reporting), and the next write to it pays that cost again, so a")
		w.line("save right after a delete is fast and one after a pause is not (section 10 shows both). Compare the samples, not only the median ratio.")
	}
	w.line("")
	if r.FullRun {
		w.f("**`make bench` took %.1f minutes** for the run that wrote this file (sections: %s).\n\n", r.RunSeconds/60, sectionTimes(r))
	} else {
		w.f("This file was last written by a partial run (`--only`); section times: %s.\n\n", sectionTimes(r))
	}
	headline(&w, r)
	if r.Replay != nil {
		replayDoc(&w, r.Replay)
	}
	if r.Codec != nil {
		codecDoc(&w, r.Codec)
	}
	if r.TorchIO != nil || r.SeqIO != nil {
		mountDoc(&w, r)
	}
	if r.Training != nil {
		trainingDoc(&w, r.Training)
	}
	if r.Scale != nil {
		scaleDoc(&w, r.Scale)
	}
	if r.Peers != nil {
		peersDoc(&w, r.Peers)
	}
	if r.Reads != nil {
		readsDoc(&w, r.Reads)
	}
	if r.SaveStall != nil {
		saveStallDoc(&w, r.SaveStall, r.TorchIO)
	}
	if r.Save1G != nil {
		save1gDoc(&w, r.Save1G)
	}
	return w.String()
}

type docWriter struct{ strings.Builder }

func (w *docWriter) line(s string)             { w.WriteString(s + "\n") }
func (w *docWriter) f(format string, a ...any) { fmt.Fprintf(w, format, a...) }
func (w *docWriter) row(cells ...string)       { w.line("| " + strings.Join(cells, " | ") + " |") }
func (w *docWriter) cmd(s string)              { w.f("Command: `%s`\n\n", s) }
func (w *docWriter) header(cells ...string) {
	w.row(cells...)
	w.row(slices.Repeat([]string{"---"}, len(cells))...)
}
func pct(x float64) string     { return fmt.Sprintf("%.1f%%", 100*x) }
func f2(x float64) string      { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string      { return fmt.Sprintf("%.3f", x) }
func mibs(n int64) string      { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
func mb(n int64) string        { return fmt.Sprintf("%.1f", float64(n)/1e6) }
func secs(xs []float64) string { return joinF(xs, "%.2f") }
func joinF(xs []float64, format string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, ", ")
}

func sectionTimes(r *Results) string {
	var s []string
	for _, st := range r.Sections {
		s = append(s, fmt.Sprintf("%s %.0f s", st.Name, st.Seconds))
	}
	return strings.Join(s, ", ")
}

func ratioOrDash(p *float64) string {
	if p == nil {
		return "-"
	}
	return f3(*p)
}

func (s *ReplaySection) run(series, snapDis string) *CompareRun {
	for i := range s.Compare {
		if s.Compare[i].Series == series && s.Compare[i].SnapDis == snapDis {
			return &s.Compare[i]
		}
	}
	return nil
}

func (c *CompareRun) method(name string) *MethodResult {
	if c == nil {
		return nil
	}
	for i := range c.Methods {
		if c.Methods[i].Method == name {
			return &c.Methods[i]
		}
	}
	return nil
}

// best is the snap_dis at which a method of a series wrote least.
func (s *ReplaySection) best(series, method string) (string, *MethodResult) {
	var bestSD string
	var best *MethodResult
	for _, sd := range snapDises {
		if m := s.run(series, sd).method(method); m != nil && (best == nil || m.WrittenVolumeRatio < best.WrittenVolumeRatio) {
			bestSD, best = sd, m
		}
	}
	return bestSD, best
}

func headline(w *docWriter, r *Results) {
	w.line("## Headline figures")
	w.line("")
	if s := r.Replay; s != nil {
		w.f("- **Write volume** (real PyTorch series, preconditioned simulated SSD, the paper's Fig. 9): ckptfs's `planes` codec with the progressive scheme writes ")
		var parts []string
		for _, set := range seriesSets {
			sd, m := s.best(set, "planes_pr")
			_, dyn := s.best(set, "DynRLE_pr")
			if m == nil || dyn == nil {
				continue
			}
			parts = append(parts, fmt.Sprintf("**%s** of what a plain filesystem writes on %s (snap_dis %s; the paper's DynRLE_pr, run here: %s)",
				f3(m.WrittenVolumeRatio), seriesName(set), sd, f3(dyn.WrittenVolumeRatio)))
		}
		w.f("%s. The paper's best was 0.69.\n", strings.Join(parts, "; "))
		if m := s.run("adam", "5").method("planes_pr"); m != nil {
			w.f("- **Erases** (Fig. 10, %s device): planes_pr on fp32+Adam at snap_dis 5 erased %d blocks where the plain filesystem erased %d (erase_ratio %s).\n",
				s.DeviceSize, m.DeviceErases, m.ShadowErases, ratioOrDash(m.EraseRatio))
		}
	}
	if c := r.Codec; c != nil {
		for _, row := range c.Rows {
			if row.Codec == "planes" && row.Data == "adam/fp32" && row.Kind == "delta" {
				w.f("- **Codec** (planes, fp32+Adam deltas, one core): encodes %.0f MB/s, decodes %.0f MB/s", row.EncMBs, row.DecMBs)
			}
		}
		for _, p := range c.Pipeline {
			if p.Op == "enc" && p.Workers == r.Machine.NProc {
				w.f("; the encoding pipeline with %d workers: %.0f MB/s wall clock", p.Workers, p.MedianMBs)
			}
		}
		w.line(".")
	}
	if t := r.TorchIO; t != nil {
		w.f("- **Mount** (%s real checkpoint, mount ÷ plain directory, medians of %d): torch.save %s×, torch.load %s×, cp in %s×, cp out %s×.",
			mibs(t.CheckpointBytes), len(t.Ops["save"].Mount), f2(t.Ops["save"].Ratio), f2(t.Ops["load"].Ratio), f2(t.Ops["cp_in"].Ratio), f2(t.Ops["cp_out"].Ratio))
		if l := t.Ops["save_loopback"]; l != nil {
			w.f(" torch.save into a go-fuse loopback that forwards writes through its daemon: %s× plain; ckptfs ÷ that loopback %s×.", f2(l.Ratio), f2(t.Ops["save"].MountMed/l.MountMed))
		}
		if m, l := t.Ops["save_rotated"], t.Ops["save_rotated_loopback"]; m != nil && l != nil {
			w.f(" Saves that delete the previous checkpoint first (the plain directory then reuses the memory it freed): ckptfs %s s, the loopback %s s, plain %s s (ckptfs %s× plain).",
				f2(m.MountMed), f2(l.MountMed), f2(m.PlainMed), f2(m.Ratio))
		}
		w.line("")
	}
	if s := r.SaveStall; s != nil {
		w.f("- **Saves that do not stall** (Hugging Face Trainer, the demo's GPT-2, a save every %d steps): training wall time into the mount ÷ plain directory %s",
			trainerEvery, f3(s.Ratio))
		if len(s.Loopback) > 0 {
			w.f(" (into a go-fuse passthrough loopback: %s)", f3(s.LoopbackRatio))
		}
		w.f("; %s of the daemon's CPU in the Go runtime.\n", pct(s.GCShare))
	}
	if s := r.Save1G; s != nil {
		pt, dw, lb := s.Targets["passthrough"], s.Targets["daemon-written"], s.Targets["loopback-passthrough"]
		w.f("- **torch.save of %s** (section 10, ÷ plain directory, medians): passthrough mount %s× (until durable %s×), daemon-written mount %s× (%s×), the passthrough go-fuse loopback %s× (%s×).\n",
			mibs(s.CheckpointBytes), f2(pt.SaveRatio), f2(pt.DurableRatio), f2(dw.SaveRatio), f2(dw.DurableRatio), f2(lb.SaveRatio), f2(lb.DurableRatio))
	}
	if q := r.SeqIO; q != nil {
		c, l, p := q.Targets["ckptfs"], q.Targets["loopback"], q.Targets["plain"]
		w.f("- **Sequential I/O** (%s file, MB/s): write %.0f through ckptfs, %.0f through a go-fuse loopback that forwards through its daemon, %.0f plain; cold read %.0f, %.0f, %.0f.",
			mibs(q.FileBytes), c.WriteMBs, l.WriteMBs, p.WriteMBs, c.ReadMBs, l.ReadMBs, p.ReadMBs)
		if pt := q.Targets["passthrough"]; pt != nil {
			w.f(" The loopback with FUSE passthrough (the kernel serves reads and writes itself): write %.0f, read %.0f.", pt.WriteMBs, pt.ReadMBs)
		}
		w.line("")
	}
	if r.Reads != nil && r.Reads.Ops["cp_out"] != nil {
		readsHeadline(w, r.Reads)
	}
	if t := r.Training; t != nil {
		w.f("- **Training slowdown**: a real training checkpointing %s every %d steps took %s longer into the mount than into a plain directory (medians %.1f s against %.1f s; %.2f s more per checkpoint).\n",
			mibs(t.CheckpointBytes), trainEvery, pct(t.Slowdown), t.MountMed, t.PlainMed, t.PerCheckpoint)
	}
	if s := r.Scale; s != nil && len(s.Sizes) > 0 {
		big := s.Sizes[len(s.Sizes)-1]
		w.f("- **Scale**: a %s checkpoint is ingested at %.0f MB/s (baseline) and %.0f MB/s (delta), read at %.0f MB/s; the daemon's peak RSS was %s (issue 6 bound %s: %s).",
			mibs(big.Bytes), big.BaseMBs, big.DeltaMBs, big.ReadMBs, mibs(big.DaemonHWM), mibs(s.Limits.DaemonMaxRSS), verdict(big.DaemonHWM <= s.Limits.DaemonMaxRSS))
		if s.Replay != nil {
			w.f(" `ckptfs replay` of two %s checkpoints peaked at up to %s (issue 5 bound %s: %s).",
				mibs(s.Replay.FileBytes), mibs(s.Replay.MaxRSS), mibs(s.Limits.ReplayMaxRSS), verdict(s.Replay.MaxRSS < s.Limits.ReplayMaxRSS))
		}
		w.line("")
	}
	if r.Peers != nil {
		peersHeadline(w, r.Peers)
	}
	w.line("")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func seriesName(set string) string {
	switch set {
	case "adam":
		return "fp32 + Adam"
	case "sgd":
		return "fp32 + SGD momentum"
	case "bf16":
		return "bf16 weights (AdamW)"
	case "adam-stream":
		return "fp32 + Adam, streaming data (harsh)"
	}
	return set
}

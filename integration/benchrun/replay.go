package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/chain/replay"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

// seriesSets are the real training series of Fig. 9/10 and Table 9: fp32
// weights with Adam, fp32 with SGD momentum, bf16 weights (AdamW).
var seriesSets = []string{"adam", "sgd", "bf16"}

// snapDises are the paper's three static values, then ours.
var snapDises = []string{"3", "5", "10", "auto"}

// figDevice is the simulated SSD of Fig. 9/10: the paper's geometry with
// fewer blocks. On the paper's 32 GiB device a series (80 MB) is far
// smaller than the stale and free space the Table 8 warm-up leaves, so the
// erases are the garbage collector's first pass over that space and are the
// same for every method (PaperDevice shows it); on 256 MiB the series is
// larger than it, and the erases follow the writes as in the paper.
const figDevice = "256MiB"

// timelineSeries and timelineSnapDis pick the compare run whose erases are
// measured per checkpoint and drawn.
const (
	timelineSeries  = "adam"
	timelineSnapDis = "5"
)

func runReplaySection(b *bench) error {
	sec := &ReplaySection{DeviceSize: figDevice}
	b.res.Replay = sec
	for _, set := range seriesSets {
		for _, sd := range snapDises {
			run, err := b.compare(set, sd, "--precondition", "paper", "--device-size", figDevice)
			if err != nil {
				return err
			}
			sec.Compare = append(sec.Compare, *run)
		}
	}
	// The harsh series (fresh data every step, constant learning rate).
	run, err := b.compare("adam-stream", "5", "--precondition", "paper", "--device-size", figDevice)
	if err != nil {
		return err
	}
	sec.Compare = append(sec.Compare, *run)
	if sec.PaperDevice, err = b.compare(timelineSeries, "5", "--precondition", "paper"); err != nil {
		return err
	}
	for _, set := range seriesSets {
		run, err := b.compare(set, "5", "--precondition", "paper", "--keep", "latest")
		if err != nil {
			return err
		}
		sec.Table9 = append(sec.Table9, *run)
	}
	for i := range sec.Compare {
		if sec.Compare[i].Series != timelineSeries || sec.Compare[i].SnapDis != timelineSnapDis {
			sec.Compare[i].dropSteps()
		}
	}
	sec.PaperDevice.dropSteps()
	tl, err := b.timeline(sec, "--precondition", "paper", "--device-size", figDevice)
	if err != nil {
		return err
	}
	sec.Timeline = tl
	return b.replayPlots(sec)
}

func (r *CompareRun) dropSteps() {
	for i := range r.Methods {
		r.Methods[i].Steps = nil
	}
}

// compareJSON is the output of replay --json --compare.
type compareJSON struct {
	Methods []struct {
		Method  string `json:"method"`
		Codec   string `json:"codec"`
		Scheme  string `json:"scheme"`
		SnapDis string `json:"snap_dis"`
		Result  struct {
			storedir.Report
			Steps []replay.Step `json:"steps"`
		} `json:"result"`
	} `json:"methods"`
}

// compare runs `ckptfs replay --compare` on a series' checkpoints.
func (b *bench) compare(set, snapDis string, flags ...string) (*CompareRun, error) {
	files, glob, err := b.seriesFiles(set)
	if err != nil {
		return nil, err
	}
	return b.compareFiles(set, snapDis, files, glob, flags...)
}

func (b *bench) compareFiles(set, snapDis string, files []string, glob string, flags ...string) (*CompareRun, error) {
	args := append([]string{"replay", "--json", "--quiet", "--compare", "--snap-dis", snapDis}, flags...)
	shown := b.display(append([]string{b.bin}, args...)...) + " " + glob
	args = append(append(args, "--work-dir", b.tmp), files...)
	t0 := time.Now()
	out, err := b.output(nil, b.bin, args...)
	if err != nil {
		return nil, err
	}
	var cj compareJSON
	if err := json.Unmarshal(out, &cj); err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	if len(cj.Methods) == 0 {
		return nil, fmt.Errorf("%s: no methods in the output", shown)
	}
	run := &CompareRun{Series: set, SnapDis: snapDis, Files: len(files), Command: shown, Seconds: since(t0), raw: out}
	for _, m := range cj.Methods {
		r := &m.Result
		mr := MethodResult{Method: m.Method, Codec: m.Codec, Scheme: m.Scheme, SnapDis: m.SnapDis,
			LogicalBytes: r.LogicalBytes, WrittenVolumeRatio: r.WrittenVolumeRatio, EraseRatio: r.EraseRatio,
			DeviceBytes: r.Device.HostPagesWritten * int64(r.Device.PageSize), ShadowBytes: r.Shadow.HostPagesWritten * int64(r.Shadow.PageSize),
			DeviceErases: r.Device.Erases, ShadowErases: r.Shadow.Erases,
			DeviceGCCopies: r.Device.GCPagesCopied, ShadowGCCopies: r.Shadow.GCPagesCopied, UsefulStoragePages: r.UsefulStoragePages}
		for _, s := range r.Steps {
			if !s.Verified {
				return nil, fmt.Errorf("%s: %s: %s was not verified", shown, m.Method, s.Path)
			}
			mr.MeanSaveMs += s.SaveMs / float64(len(r.Steps))
			mr.MeanRestoreMs += s.RestoreMs / float64(len(r.Steps))
			mr.Steps = append(mr.Steps, StepResult{Path: s.Path, DevicePages: s.DevicePagesWritten, ShadowPages: s.ShadowPagesWritten,
				Depth: s.Depth, SaveMs: s.SaveMs, RestoreMs: s.RestoreMs, UsefulPages: s.UsefulPages})
		}
		run.Methods = append(run.Methods, mr)
	}
	logf("replay %s snap_dis %s %s: %.0f s", set, snapDis, strings.Join(flags, " "), run.Seconds)
	return run, nil
}

// timeline measures the erases after each checkpoint of the timeline run
// by replaying each prefix of its files (replay reports only totals, and
// is deterministic, so the prefix of k files erases what the first k steps
// of the full run did).
func (b *bench) timeline(sec *ReplaySection, flags ...string) (*Timeline, error) {
	var full *CompareRun
	for i := range sec.Compare {
		if sec.Compare[i].Series == timelineSeries && sec.Compare[i].SnapDis == timelineSnapDis {
			full = &sec.Compare[i]
		}
	}
	if full == nil {
		return nil, fmt.Errorf("no compare run of %s at snap_dis %s", timelineSeries, timelineSnapDis)
	}
	files, glob, err := b.seriesFiles(timelineSeries)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{Series: timelineSeries, SnapDis: timelineSnapDis, Consistent: true}
	t0 := time.Now()
	for k := 1; k <= len(files); k++ {
		run, err := b.compareFiles(timelineSeries, timelineSnapDis, files[:k], fmt.Sprintf("%s (first %d)", glob, k), flags...)
		if err != nil {
			return nil, err
		}
		for i := range full.Methods {
			m, p := &full.Methods[i], &run.Methods[i]
			dev, sh := p.DeviceErases, p.ShadowErases
			m.Steps[k-1].DeviceErases, m.Steps[k-1].ShadowErases = &dev, &sh
			if k == len(files) && (dev != m.DeviceErases || sh != m.ShadowErases) {
				tl.Consistent = false
			}
		}
	}
	tl.Seconds = since(t0)
	return tl, nil
}

// replayPlots draws charts of the timeline run and of each series' snap_dis
// 5 run with ckptfs report, and keeps them in docs/img.
func (b *bench) replayPlots(sec *ReplaySection) error {
	for _, run := range sec.Compare {
		if run.SnapDis != "5" {
			continue
		}
		in := filepath.Join(b.tmp, fmt.Sprintf("replay-%s-snap%s.json", run.Series, run.SnapDis))
		raw := run.raw
		keep := []string{"methods_written.png", "methods_erases.png"}
		how := run.Command + " > replay.json"
		title := seriesName(run.Series) + ", snap_dis " + run.SnapDis
		if run.Series == sec.Timeline.Series && run.SnapDis == sec.Timeline.SnapDis {
			var err error
			if raw, err = withStepErases(run); err != nil {
				return err
			}
			keep = append(keep, "bytes_written.png", "cumulative_erases.png", "erase_histogram.png", "chain_depth.png")
			how += "; per-checkpoint erases added to its steps from replays of each prefix of the files"
		}
		if err := os.WriteFile(in, raw, 0o644); err != nil {
			return err
		}
		plots, err := b.drawReport([]string{"--from", in, "--method", "planes_pr"},
			"bin/ckptfs report --from replay.json --method planes_pr --out DIR",
			fmt.Sprintf("replay-%s-snap%s-", run.Series, run.SnapDis), keep)
		if err != nil {
			return err
		}
		for i := range plots {
			plots[i].Command = how + "; " + plots[i].Command
			plots[i].Title += " — " + title
		}
		sec.Plots = append(sec.Plots, plots...)
	}
	return nil
}

// drawReport runs ckptfs report with args and copies the charts named in
// keep to docs/img/prefix+name; shown is the command as the document names it.
func (b *bench) drawReport(args []string, shown, prefix string, keep []string) ([]Plot, error) {
	dir, err := os.MkdirTemp(b.tmp, "report-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	args = append(append([]string{"report"}, args...), "--out", dir)
	if _, err := b.output(nil, b.bin, args...); err != nil {
		return nil, err
	}
	var plots []Plot
	for _, name := range keep {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("ckptfs report drew no %s: %w", name, err)
		}
		file := prefix + name
		if err := os.WriteFile(filepath.Join(b.out, "img", file), data, 0o644); err != nil {
			return nil, err
		}
		plots = append(plots, Plot{File: "img/" + file, Title: chartTitle(name), Command: shown})
	}
	return plots, nil
}

func chartTitle(name string) string {
	switch name {
	case "methods_written.png":
		return "Bytes written per method (Fig. 9)"
	case "methods_erases.png":
		return "Erases per method (Fig. 10)"
	case "bytes_written.png":
		return "Bytes written per checkpoint"
	case "cumulative_erases.png":
		return "Cumulative erases per checkpoint"
	case "erase_histogram.png":
		return "Erase counts across blocks"
	case "chain_depth.png":
		return "Chain depth"
	case "stored_vs_logical.png":
		return "Stored beside logical size per file"
	}
	return name
}

// withStepErases is the run's replay JSON with device_erases and
// shadow_erases added to every step, which ckptfs report draws.
func withStepErases(run CompareRun) ([]byte, error) {
	var doc struct {
		Methods []map[string]any `json:"methods"`
	}
	if err := json.Unmarshal(run.raw, &doc); err != nil {
		return nil, err
	}
	for i, m := range doc.Methods {
		res, _ := m["result"].(map[string]any)
		steps, _ := res["steps"].([]any)
		if len(steps) != len(run.Methods[i].Steps) {
			return nil, fmt.Errorf("method %d: %d steps in the replay, %d measured", i, len(steps), len(run.Methods[i].Steps))
		}
		for k, s := range steps {
			st := s.(map[string]any)
			ms := run.Methods[i].Steps[k]
			if ms.DeviceErases == nil {
				return nil, fmt.Errorf("method %d step %d: no erases measured", i, k)
			}
			st["device_erases"], st["shadow_erases"] = *ms.DeviceErases, *ms.ShadowErases
		}
	}
	return json.Marshal(doc)
}

// Command benchrun measures ckptfs on this machine and writes the benchmark
// document (docs/BENCHMARKS.md), the figures behind it (docs/benchmarks.json)
// and its charts (docs/img/*.png). `make bench` runs it after building the
// binary and generating the real training series:
//
//	go run ./integration/benchrun --bin bin/ckptfs --out docs
//
// Each section runs the real binary, real programs (python3-torch, cp) and
// real mounts; every figure records the command that made it. --only runs
// some sections and keeps the others' figures from the existing JSON, for
// working on one section; the committed document comes from a full run.
//
// "benchrun loopback [-passthrough] ORIG MNT" is the go-fuse loopback server
// the sections compare ckptfs with, run by this program as a subprocess;
// "benchrun peakrss" measures one command's own peak RSS (peakrss.go).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// section is one part of the benchmark.
type section struct {
	name   string
	run    func(*bench) error
	series bool // reads the real training series (make series)
}

var sections = []section{
	{"replay", runReplaySection, true},
	{"codec", runCodecSection, true},
	{"torchio", runTorchIOSection, false},
	{"seqio", runSeqIOSection, false},
	{"training", runTrainingSection, false},
	{"scale", runScaleSection, false},
	{"peers", runPeerSection, true},
	{"reads", runReadsSection, true},
	{"savestall", runSaveStallSection, false},
	{"save1g", runSave1GSection, false},
	{"resume", runResumeSection, false},
}

// bench is the run's configuration and its results so far.
type bench struct {
	root   string // the repository (working directory)
	bin    string // ckptfs binary, absolute
	self   string // this program, for the loopback subprocess
	python string
	series string // directory holding adam/ sgd/ bf16/
	out    string // docs directory
	tmp    string // scratch directory on the disk being measured
	reps   int
	// trainer is the savestall section's model.
	trainer struct {
		layers, width int
		gpu           bool
	}
	res *Results
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "loopback" {
		if err := serveLoopback(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun loopback:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "peakrss" {
		if err := servePeakRSS(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun peakrss:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "render" {
		if err := serveRender(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun render:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func run() error {
	var b bench
	var only, tmpBase string
	flag.StringVar(&b.bin, "bin", "bin/ckptfs", "the ckptfs binary to measure")
	flag.StringVar(&b.python, "python", "/usr/bin/python3", "python3 with torch and numpy")
	flag.StringVar(&b.series, "series", envOr("CKPTFS_SERIES", ".cache/series"), "real training series (make series)")
	flag.StringVar(&b.out, "out", "docs", "where BENCHMARKS.md, benchmarks.json and img/ go")
	flag.StringVar(&tmpBase, "tmp", "", "scratch directory on the disk to measure (default: the system temp dir)")
	flag.StringVar(&only, "only", "", "comma-separated sections to run ("+sectionNames()+"); the others keep their figures from the existing JSON")
	flag.IntVar(&b.reps, "reps", 5, fmt.Sprintf("repetitions of each timed comparison (medians are reported; the Trainer's savestall runs at least %d)", trainerMinReps))
	flag.IntVar(&resumeMiB, "resume-mib", resumeMiB, "resume: MiB of the training state saved and read back")
	flag.Float64Var(&save1gPause, "save1g-pause", save1gPause, "save1g: seconds between a target's delete of its previous checkpoint and its timed save")
	flag.IntVar(&b.trainer.layers, "trainer-layers", 4, "savestall: the Trainer's GPT-2 layers")
	flag.IntVar(&b.trainer.width, "trainer-width", 256, "savestall: the Trainer's GPT-2 width (8 layers at 1024 save ~1.2 GB checkpoints)")
	flag.BoolVar(&b.trainer.gpu, "trainer-gpu", false, "savestall: train on the GPU where there is one")
	flag.Parse()
	var err error
	if b.root, err = os.Getwd(); err != nil {
		return err
	}
	for _, p := range []*string{&b.bin, &b.series, &b.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.ContainsFunc(sections, func(x section) bool { return x.name == s }) {
			return fmt.Errorf("--only %s: no such section (have %s)", s, sectionNames())
		}
		want[s] = true
	}
	if err := b.preflight(want); err != nil {
		return err
	}
	b.res = &Results{}
	if len(want) > 0 {
		if old, err := os.ReadFile(filepath.Join(b.out, "benchmarks.json")); err == nil {
			if err := json.Unmarshal(old, b.res); err != nil {
				return fmt.Errorf("existing benchmarks.json: %w", err)
			}
		}
	}
	if b.tmp, err = os.MkdirTemp(tmpBase, "ckptfs-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	if err := os.MkdirAll(filepath.Join(b.out, "img"), 0o755); err != nil {
		return err
	}
	if len(want) == 0 {
		// A full run redraws every chart; none of an earlier run may linger.
		old, _ := filepath.Glob(filepath.Join(b.out, "img", "*.png"))
		for _, f := range old {
			os.Remove(f)
		}
	}
	b.res.Machine = machineInfo(b.python, b.tmp)
	logf("warming the machine's free memory (first writes to a VM's memory are slow)")
	b.res.Machine.WarmedMiB, b.res.Machine.WarmSeconds = warmMemory()
	logf("warmed %d MiB in %.1f s", b.res.Machine.WarmedMiB, b.res.Machine.WarmSeconds)
	b.res.Commit = gitCommit(b.root)
	b.res.Generated = time.Now().UTC().Format(time.RFC3339)
	start := time.Now()
	var failed error
	for _, s := range sections {
		if len(want) > 0 && !want[s.name] {
			continue
		}
		logf("== %s", s.name)
		t0 := time.Now()
		err := s.run(&b)
		b.res.setSectionTime(s.name, time.Since(t0).Seconds())
		if err != nil {
			failed = fmt.Errorf("section %s: %w", s.name, err)
			break
		}
		logf("== %s done in %.0f s", s.name, time.Since(t0).Seconds())
	}
	b.res.Machine.LoadAvgEnd = loadAvg()
	b.res.RunSeconds = time.Since(start).Seconds()
	b.res.FullRun = len(want) == 0 && failed == nil
	if err := b.writeOutputs(); err != nil {
		return errors.Join(failed, err)
	}
	logf("wrote %s in %.0f s", filepath.Join(b.out, "BENCHMARKS.md"), b.res.RunSeconds)
	return failed
}

// preflight fails early on what would fail a section twenty minutes in.
// want is the sections to run (all when empty).
func (b *bench) preflight(want map[string]bool) error {
	if _, err := os.Stat(b.bin); err != nil {
		return fmt.Errorf("ckptfs binary: %w (run make build)", err)
	}
	needSeries := false
	for _, s := range sections {
		needSeries = needSeries || s.series && (len(want) == 0 || want[s.name])
	}
	for _, s := range seriesSets {
		if !needSeries {
			break
		}
		if _, err := os.Stat(filepath.Join(b.series, s, ".done")); err != nil {
			return fmt.Errorf("training series %s: %w (run make series)", s, err)
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse: %w", err)
	}
	return nil
}

func (b *bench) writeOutputs() error {
	js, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.out, "benchmarks.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	doc, err := renderDoc(b.res)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.out, "BENCHMARKS.md"), []byte(doc), 0o644)
}

func sectionNames() string {
	var n []string
	for _, s := range sections {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

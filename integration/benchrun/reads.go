package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ckptfs/ckptfs/fs"
)

// readsPython is a Python with torch >= 2.1 (torch.load(mmap=True)) and
// safetensors: the venv `make deps` builds, unless CKPTFS_READS_PYTHON says.
func readsPython() string {
	home, _ := os.UserHomeDir()
	return envOr("CKPTFS_READS_PYTHON", filepath.Join(home, ".cache/ckptfs/venv/bin/python"))
}

// depthSaves is how many saves the depth run makes under --snap-dis: one
// more than the depths measured, since the newest save is served from the
// reference tier without decoding.
const depthSaves = 7

// runReadsSection times cold reads out of the mount beside a plain
// directory (integration/py/bench_reads.py): torch.load, torch.load(mmap),
// safe_open of every tensor and cp of the deepest save the default policy
// made, cp of the newest (the verify step), then, in a second mount with a
// fixed --snap-dis, cp of a save at each chain depth; and the write volume
// each --max-depth costs on the training series (the other side of the
// trade-off).
func runReadsSection(b *bench) error {
	py := readsPython()
	if _, err := os.Stat(py); err != nil {
		return fmt.Errorf("python with torch and safetensors: %w (set CKPTFS_READS_PYTHON)", err)
	}
	sec := &Reads{Python: py, ReadAheadKiB: fs.ReadAheadKiB, RefTierMiB: mountRefTierMiB()}
	got, cmd, hwm, err := b.benchReads("reads", nil, "--reps", strconv.Itoa(b.reps), "--depth-reps", "0")
	if err != nil {
		return err
	}
	sec.Command, sec.DaemonHWM = cmd, hwm
	sec.CheckpointBytes, sec.SafetensorsBytes = got.CheckpointBytes, got.SafetensorsBytes
	sec.Deepest, sec.DeepestSafetensors, sec.Identical = got.Deepest, got.DeepestSafetensors, got.Identical
	sec.Ops = map[string]*ABTimes{}
	for op, t := range got.Times {
		bytes := got.CheckpointBytes
		if op == "safe_open" {
			bytes = got.SafetensorsBytes
		}
		sec.Ops[op] = abTimes(t["mount"], t["plain"], bytes)
	}
	snap := strconv.Itoa(depthSaves)
	got, cmd, _, err = b.benchReads("reads-depth", []string{"--snap-dis", snap}, "--saves", snap, "--reps", "1", "--ops", "",
		"--depth-reps", strconv.Itoa(b.reps), "--no-safetensors")
	if err != nil {
		return err
	}
	sec.DepthCommand = cmd
	sec.Identical = sec.Identical && got.Identical
	for _, r := range got.Depth {
		sec.Depth = append(sec.Depth, DepthRead{Depth: r.Depth, Newest: r.Newest, ABTimes: abTimes(r.Mount, r.Plain, got.CheckpointBytes)})
	}
	if !sec.Identical {
		return fmt.Errorf("bench_reads.py: a checkpoint read back from the mount differs from the plain copy")
	}
	if sec.WriteCost, err = b.maxDepthCost(); err != nil {
		return err
	}
	b.res.Reads = sec
	return nil
}

// readsOutput is what bench_reads.py prints.
type readsOutput struct {
	CheckpointBytes    int64                           `json:"checkpoint_bytes"`
	SafetensorsBytes   int64                           `json:"safetensors_bytes"`
	Deepest            int                             `json:"deepest"`
	DeepestSafetensors int                             `json:"deepest_safetensors"`
	Identical          bool                            `json:"identical"`
	Times              map[string]map[string][]float64 `json:"times"`
	Depth              []struct {
		Depth  int       `json:"depth"`
		Newest bool      `json:"newest"`
		Mount  []float64 `json:"mount"`
		Plain  []float64 `json:"plain"`
	} `json:"depth"`
}

// benchReads runs bench_reads.py on a fresh mount made with flags.
func (b *bench) benchReads(name string, flags []string, args ...string) (*readsOutput, string, int64, error) {
	d, err := b.mount(name, flags...)
	if err != nil {
		return nil, "", 0, err
	}
	defer func() {
		if d != nil {
			d.unmount()
		}
	}()
	base := filepath.Join(b.tmp, name)
	full := append([]string{filepath.Join(b.root, "integration/py/bench_reads.py"), "--mount", d.mnt, "--store", d.store,
		"--plain", filepath.Join(base, "plain"), "--outdir", filepath.Join(base, "out")}, args...)
	cmd := b.display(append([]string{"bin/ckptfs", "mount"}, append(flags, "MNT;")...)...) + " " + b.display(append([]string{"python"}, full...)...)
	logf("bench_reads.py %v", args)
	out, err := b.output(nil, readsPython(), full...)
	if err != nil {
		return nil, "", 0, err
	}
	var got readsOutput
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, "", 0, fmt.Errorf("bench_reads.py output: %w", err)
	}
	hwm := d.peakRSS()
	err = d.unmount()
	d = nil
	os.RemoveAll(base)
	return &got, cmd, hwm, err
}

// maxDepthCost replays each training series under --snap-dis auto with
// each --max-depth: the write volume a bound on the read cost gives up.
func (b *bench) maxDepthCost() ([]DepthCost, error) {
	var rows []DepthCost
	for _, set := range []string{"adam", "sgd", "bf16"} {
		files, _, err := b.seriesFiles(set)
		if err != nil {
			return nil, err
		}
		for _, k := range []int{0, 1, 2, 3, 4, 5} {
			args := []string{"replay", "--json", "--quiet", "--snap-dis", "auto", "--max-depth", strconv.Itoa(k)}
			if k == 0 {
				args = []string{"replay", "--json", "--quiet", "--snap-dis", "1"}
			}
			out, err := b.output(nil, b.bin, append(args, files...)...)
			if err != nil {
				return nil, err
			}
			var rep struct {
				WVR   float64 `json:"written_volume_ratio"`
				Files []struct {
					Depth int `json:"chain_depth"`
				} `json:"files"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				return nil, fmt.Errorf("replay %s: %w", set, err)
			}
			row := DepthCost{Series: set, MaxDepth: k, WrittenVolumeRatio: rep.WVR}
			for _, f := range rep.Files {
				row.MeanDecodes += float64(f.Depth+1) / float64(len(rep.Files))
				row.MaxDecodes = max(row.MaxDecodes, f.Depth+1)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

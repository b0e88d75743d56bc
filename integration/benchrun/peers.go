package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/ckptfs/ckptfs/encode"
)

// PeerSection sets ckptfs's codecs beside the tools a user has without
// ckptfs, on the same files: ZipNN (the best-known lossless compressor for
// model weights) file by file and as its XOR delta of consecutive versions,
// and zstd -3 / -19 of each whole file.
type PeerSection struct {
	TrainerCommand string    `json:"trainer_command"`
	Sets           []PeerSet `json:"sets"`
}

// PeerSet is one series' figures. Sizes are summed over its files.
type PeerSet struct {
	Series       string     `json:"series"`
	Files        int        `json:"files"`
	PlainBytes   int64      `json:"plain_bytes"`
	ZipNNDType   string     `json:"zipnn_dtype"`
	ZipNNVersion string     `json:"zipnn_version"`
	ZipNNCommand string     `json:"zipnn_command"`
	ZipNN        []ZipNNRun `json:"zipnn"`
	// ZipNNError is why ZipNN has no figures for the series (its script
	// failed: zipnn 0.5.4's native code has aborted on the Trainer series
	// with a corrupted heap).
	ZipNNError   string       `json:"zipnn_error,omitempty"`
	Zstd         []ZstdRun    `json:"zstd"`
	CodecCommand string       `json:"codec_command"`
	Codecs       []PeerCodec  `json:"codecs"`
	Replay       []PeerReplay `json:"replay"`
}

// ZipNNRun is bench_zipnn.py's figures for one mode and thread count.
type ZipNNRun struct {
	Mode       string  `json:"mode"` // base or delta
	Threads    int     `json:"threads"`
	Plain      int64   `json:"plain"`
	Compressed int64   `json:"compressed"`
	DeltaFiles int     `json:"delta_files"`
	CompCPU    float64 `json:"comp_cpu"`
	CompWall   float64 `json:"comp_wall"`
	DecompCPU  float64 `json:"decomp_cpu"`
	DecompWall float64 `json:"decomp_wall"`
}

// ZstdRun is the zstd CLI at one level, one thread, file by file.
type ZstdRun struct {
	Level      int     `json:"level"`
	Compressed int64   `json:"compressed"`
	CompCPU    float64 `json:"comp_cpu"` // the child processes' CPU time
	DecompCPU  float64 `json:"decomp_cpu"`
	Command    string  `json:"command"`
}

// PeerCodec is one ckptfs codec over the files' chunks, in process.
type PeerCodec struct {
	Codec string `json:"codec"`
	Kind  string `json:"kind"` // base: no reference; delta: each file against the previous version
	codecRun
}

// PeerReplay is ckptfs replay of the files at one snap_dis.
type PeerReplay struct {
	Codec              string  `json:"codec"`
	SnapDis            string  `json:"snap_dis"`
	StoredBytes        int64   `json:"stored_bytes"`
	LogicalBytes       int64   `json:"logical_bytes"`
	WrittenVolumeRatio float64 `json:"written_volume_ratio"`
	Command            string  `json:"command"`
}

// peerSets are the series of make series and the dtype ZipNN is told.
var peerSets = []struct{ name, dtype string }{
	{"adam", "float32"}, {"sgd", "float32"}, {"bf16", "bfloat16"}, {"adam-stream", "float32"}, {"trainer", "float32"},
}

func runPeerSection(b *bench) error {
	sec := &PeerSection{}
	for _, ps := range peerSets {
		var files []string
		var glob string
		var err error
		if ps.name == "trainer" {
			files, glob, err = b.trainerSeries(sec)
		} else {
			files, glob, err = b.seriesFiles(ps.name)
		}
		if err != nil {
			return err
		}
		logf("peers: %s (%d files)", ps.name, len(files))
		set, err := b.peerSet(ps.name, ps.dtype, files, glob)
		if err != nil {
			return fmt.Errorf("%s: %w", ps.name, err)
		}
		sec.Sets = append(sec.Sets, *set)
	}
	b.res.Peers = sec
	return nil
}

func (b *bench) peerSet(name, dtype string, files []string, glob string) (*PeerSet, error) {
	set := &PeerSet{Series: name, Files: len(files), ZipNNDType: dtype}
	chunks, plain, err := seriesChunks(files)
	if err != nil {
		return nil, err
	}
	set.PlainBytes = plain
	set.CodecCommand = fmt.Sprintf("go run ./integration/benchrun --only peers (in process: the files cut as the store cuts them, %s)", glob)
	for _, c := range []encode.Codec{encode.Planes, encode.Scaled, encode.DynRLE} {
		for _, kind := range []string{"base", "delta"} {
			r, err := runFileCodec(chunks, c, kind == "delta")
			if err != nil {
				return nil, err
			}
			set.Codecs = append(set.Codecs, PeerCodec{Codec: c.String(), Kind: kind, codecRun: *r})
		}
	}
	if set.Zstd, err = b.zstdRuns(files, glob); err != nil {
		return nil, err
	}
	if err := b.zipnnRuns(set, files, glob); err != nil {
		// A crash of the peer is a figure we lack, not a failure of ours.
		msg := strings.TrimSpace(err.Error())
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		set.ZipNNError = "bench_zipnn.py: " + msg
		logf("peers: %s: ZipNN failed (%s); the section goes on without its figures", name, msg)
	}
	for _, c := range []string{"planes", "scaled", "dynrle"} {
		for _, sd := range []string{"1", "10"} {
			args := append([]string{"replay", "--json", "--quiet", "--codec", c, "--snap-dis", sd}, files...)
			out, err := b.output(nil, b.bin, args...)
			if err != nil {
				return nil, err
			}
			var got struct {
				Logical int64   `json:"logical_bytes"`
				Stored  int64   `json:"stored_bytes"`
				WVR     float64 `json:"written_volume_ratio"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				return nil, fmt.Errorf("replay output: %w", err)
			}
			set.Replay = append(set.Replay, PeerReplay{Codec: c, SnapDis: sd, StoredBytes: got.Stored, LogicalBytes: got.Logical,
				WrittenVolumeRatio: got.WVR, Command: fmt.Sprintf("bin/ckptfs replay --json --quiet --codec %s --snap-dis %s %s", c, sd, glob)})
		}
	}
	return set, nil
}

// zstdRuns compresses each file with the zstd CLI at -3 and -19, one
// thread, decompresses it and compares.
func (b *bench) zstdRuns(files []string, glob string) ([]ZstdRun, error) {
	var runs []ZstdRun
	tmp := filepath.Join(b.tmp, "peer.zst")
	for _, level := range []int{3, 19} {
		r := ZstdRun{Level: level, Command: fmt.Sprintf("zstd -q -T1 -%d -c FILE; zstd -q -d -c FILE.zst (each of %s)", level, glob)}
		for _, f := range files {
			out, ru, err := b.timed(nil, "zstd", "-q", "-T1", "-"+strconv.Itoa(level), "-c", f)
			if err != nil {
				return nil, err
			}
			r.Compressed += int64(len(out))
			r.CompCPU += cpuSeconds(ru)
			if err := os.WriteFile(tmp, out, 0o644); err != nil {
				return nil, err
			}
			back, ru, err := b.timed(nil, "zstd", "-q", "-d", "-c", tmp)
			if err != nil {
				return nil, err
			}
			r.DecompCPU += cpuSeconds(ru)
			want, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(back, want) {
				return nil, fmt.Errorf("zstd -%d: %s does not round-trip", level, f)
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func (b *bench) zipnnRuns(set *PeerSet, files []string, glob string) error {
	venvPython := filepath.Join(envOr("CKPTFS_VENV", filepath.Join(os.Getenv("HOME"), ".cache/ckptfs/venv")), "bin/python")
	script := filepath.Join(b.root, "integration/py/bench_zipnn.py")
	args := append([]string{script, "--dtype", set.ZipNNDType, "--threads", "1,2"}, files...)
	set.ZipNNCommand = fmt.Sprintf("$CKPTFS_VENV/bin/python integration/py/bench_zipnn.py --dtype %s --threads 1,2 %s", set.ZipNNDType, glob)
	out, err := b.output(nil, venvPython, args...)
	if err != nil {
		return err
	}
	var got struct {
		Version string     `json:"zipnn_version"`
		Runs    []ZipNNRun `json:"runs"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("bench_zipnn.py output: %w", err)
	}
	set.ZipNNVersion, set.ZipNN = got.Version, got.Runs
	return nil
}

// trainerSeries writes (once per run) a Hugging Face Trainer series: the
// demo's GPT-2 model, fp32 + AdamW, ten saves 50 steps apart, every save
// archived; its files in save order.
func (b *bench) trainerSeries(sec *PeerSection) ([]string, string, error) {
	dir := envOr("CKPTFS_TRAINER_SERIES", filepath.Join(b.tmp, "trainer"))
	args := []string{filepath.Join(b.root, "integration/py/writers.py"), "hf-trainer", "--out", filepath.Join(b.tmp, "trainer-run"),
		"--archive", dir, "--layers", "4", "--width", "256", "--every", "50", "--saves", "10", "--keep", "3"}
	sec.TrainerCommand = "$CKPTFS_VENV/bin/python integration/py/writers.py hf-trainer --out RUN --archive DIR --layers 4 --width 256 --every 50 --saves 10 --keep 3"
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		venvPython := filepath.Join(envOr("CKPTFS_VENV", filepath.Join(os.Getenv("HOME"), ".cache/ckptfs/venv")), "bin/python")
		logf("peers: training the Hugging Face Trainer series into %s", dir)
		if _, err := b.output([]string{"OMP_NUM_THREADS=1"}, venvPython, args...); err != nil {
			return nil, "", err
		}
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != filepath.Join(dir, "manifest.json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, "", err
	}
	// Archive directories are save indices: 2 before 10.
	idx := func(p string) int {
		rel, _ := filepath.Rel(dir, p)
		n, _ := strconv.Atoi(strings.SplitN(rel, string(filepath.Separator), 2)[0])
		return n
	}
	sort.SliceStable(files, func(i, j int) bool {
		if a, b := idx(files[i]), idx(files[j]); a != b {
			return a < b
		}
		return files[i] < files[j]
	})
	if len(files) == 0 {
		return nil, "", fmt.Errorf("trainer series: no files in %s", dir)
	}
	return files, "DIR/*/checkpoint-*/* (in save order)", nil
}

func cpuSeconds(ru *syscall.Rusage) float64 {
	if ru == nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

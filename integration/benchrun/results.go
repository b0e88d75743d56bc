package main

import "encoding/json"

// Results is docs/benchmarks.json: every figure of docs/BENCHMARKS.md, with
// the command that produced it. Times are seconds, sizes bytes, rates MB/s
// (10^6 bytes per second) unless a name says otherwise.
type Results struct {
	Generated  string         `json:"generated"`
	Commit     string         `json:"commit"`
	Machine    Machine        `json:"machine"`
	RunSeconds float64        `json:"run_seconds"` // wall time of the benchrun that wrote this file
	FullRun    bool           `json:"full_run"`    // every section ran in that one run
	Sections   []SectionTime  `json:"sections"`
	Replay     *ReplaySection `json:"replay,omitempty"`
	Codec      *CodecSection  `json:"codec,omitempty"`
	TorchIO    *TorchIO       `json:"torch_io,omitempty"`
	SeqIO      *SeqIO         `json:"sequential_io,omitempty"`
	Training   *Training      `json:"training,omitempty"`
	Scale      *Scale         `json:"scale,omitempty"`
	Peers      *PeerSection   `json:"peers,omitempty"`
	Reads      *Reads         `json:"reads,omitempty"`
	SaveStall  *SaveStall     `json:"save_stall,omitempty"`
	Save1G     *Save1G        `json:"save_1g,omitempty"`
	Resume     *Resume        `json:"resume,omitempty"`
}

// SectionTime is how long a section took in the run that last ran it.
type SectionTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

func (r *Results) setSectionTime(name string, s float64) {
	for i := range r.Sections {
		if r.Sections[i].Name == name {
			r.Sections[i].Seconds = s
			return
		}
	}
	r.Sections = append(r.Sections, SectionTime{name, s})
}

// Machine describes where the figures were measured.
type Machine struct {
	NProc        int     `json:"nproc"`
	MemTotal     int64   `json:"mem_total_bytes"`
	CPU          string  `json:"cpu"`
	Kernel       string  `json:"kernel"`
	Go           string  `json:"go"`
	Torch        string  `json:"torch"`
	Disk         string  `json:"disk"` // the filesystem the scratch directory is on
	LoadAvgStart float64 `json:"load_avg_start"`
	LoadAvgEnd   float64 `json:"load_avg_end"`
	// WarmedMiB of free memory were written once before the run, in
	// WarmSeconds (warm.go).
	WarmedMiB   int64   `json:"warmed_mib"`
	WarmSeconds float64 `json:"warm_seconds"`
}

// ReplaySection reproduces the paper's Fig. 9, Fig. 10 and Table 9.
type ReplaySection struct {
	// DeviceSize is the simulated SSD of Fig. 9/10: the paper's geometry,
	// fewer blocks, so that the replayed series exceed its free and stale
	// space and erases measure the workload (see PaperDevice).
	DeviceSize string       `json:"device_size"`
	Compare    []CompareRun `json:"compare"`
	// PaperDevice is one compare run on the paper's full 32 GiB device.
	PaperDevice *CompareRun  `json:"paper_device"`
	Table9      []CompareRun `json:"table9"`
	// Timeline is the compare run whose steps carry cumulative erases,
	// measured by replaying every prefix of the files.
	Timeline *Timeline `json:"timeline"`
	Plots    []Plot    `json:"plots"`
}

// CompareRun is one `ckptfs replay --compare` run.
type CompareRun struct {
	Series  string          `json:"series"`
	SnapDis string          `json:"snap_dis"`
	Files   int             `json:"files"`
	Command string          `json:"command"`
	Seconds float64         `json:"seconds"`
	Methods []MethodResult  `json:"methods"`
	raw     json.RawMessage // the replay's own output, for ckptfs report
}

// MethodResult is one method's row of a compare run.
type MethodResult struct {
	Method             string       `json:"method"`
	Codec              string       `json:"codec"`
	Scheme             string       `json:"scheme"`
	SnapDis            string       `json:"snap_dis"`
	LogicalBytes       int64        `json:"logical_bytes"`
	DeviceBytes        int64        `json:"device_bytes_written"`
	ShadowBytes        int64        `json:"shadow_bytes_written"`
	WrittenVolumeRatio float64      `json:"written_volume_ratio"`
	DeviceErases       int64        `json:"device_erases"`
	ShadowErases       int64        `json:"shadow_erases"`
	EraseRatio         *float64     `json:"erase_ratio"`
	DeviceGCCopies     int64        `json:"device_gc_pages_copied"`
	ShadowGCCopies     int64        `json:"shadow_gc_pages_copied"`
	UsefulStoragePages int64        `json:"useful_storage_pages"`
	MeanSaveMs         float64      `json:"mean_save_ms"`
	MeanRestoreMs      float64      `json:"mean_restore_ms"`
	Steps              []StepResult `json:"steps,omitempty"`
}

// StepResult is one checkpoint of a replay.
type StepResult struct {
	Path         string  `json:"path"`
	DevicePages  int64   `json:"device_pages_written"`
	ShadowPages  int64   `json:"shadow_pages_written"`
	Depth        uint32  `json:"chain_depth"`
	SaveMs       float64 `json:"save_ms"`
	RestoreMs    float64 `json:"restore_ms"`
	UsefulPages  int64   `json:"useful_storage_pages"`
	DeviceErases *int64  `json:"device_erases,omitempty"` // cumulative, from prefix replays
	ShadowErases *int64  `json:"shadow_erases,omitempty"`
}

// Timeline says how the per-checkpoint erases were measured.
type Timeline struct {
	Series  string `json:"series"`
	SnapDis string `json:"snap_dis"`
	// Consistent: the replay of all files erased exactly what the full
	// compare run did, for every method (replay is deterministic).
	Consistent bool    `json:"consistent"`
	Seconds    float64 `json:"seconds"`
}

// Plot is a chart in docs/img and the commands that drew it.
type Plot struct {
	File    string `json:"file"`
	Title   string `json:"title"`
	Command string `json:"command"`
}

// CodecSection is the encode package's own measurements.
type CodecSection struct {
	ReportCommand   string        `json:"report_command"`
	Rows            []CodecRow    `json:"rows"`
	PipelineCommand string        `json:"pipeline_command"`
	Pipeline        []PipelineRow `json:"pipeline"`
}

// CodecRow is one line of TestReportRatios: one core, thread CPU time.
type CodecRow struct {
	Codec    string  `json:"codec"`
	Data     string  `json:"data"`
	Kind     string  `json:"kind"` // delta or base
	Ratio    float64 `json:"ratio"`
	EncMBs   float64 `json:"enc_mb_s"`
	DecMBs   float64 `json:"dec_mb_s"`
	VsDynRLE string  `json:"vs_dynrle,omitempty"`
}

// PipelineRow is BenchmarkPipeline: wall-clock MB/s with n workers.
type PipelineRow struct {
	Op        string    `json:"op"`
	Workers   int       `json:"workers"`
	Samples   []float64 `json:"mb_s_samples"`
	MedianMBs float64   `json:"median_mb_s"`
}

// ABTimes are the times of one operation on a ckptfs mount and on a plain
// directory, measured alternately.
type ABTimes struct {
	Mount      []float64 `json:"mount_s"`
	Plain      []float64 `json:"plain_s"`
	MountMed   float64   `json:"mount_median_s"`
	PlainMed   float64   `json:"plain_median_s"`
	Ratio      float64   `json:"ratio"` // mount median ÷ plain median
	MountMBs   float64   `json:"mount_mb_s"`
	PlainMBs   float64   `json:"plain_mb_s"`
	BytesPerOp int64     `json:"bytes_per_op"`
}

// TorchIO is torch.save, torch.load and cp into and out of the mount.
type TorchIO struct {
	Command         string              `json:"command"`
	CheckpointBytes int64               `json:"checkpoint_bytes"`
	Params          int64               `json:"parameters"`
	StepsPerSave    int                 `json:"steps_per_save"`
	Ops             map[string]*ABTimes `json:"ops"` // save, load, cp_in, cp_out; save_loopback: the forwarding loopback as "mount"; save_rotated(_loopback): saves with the previous one deleted first
	Identical       bool                `json:"identical"`
	StoreRatio      float64             `json:"written_volume_ratio"` // of the mount after the run
	DaemonHWM       int64               `json:"daemon_peak_rss_bytes"`
	RefTierMiB      int64               `json:"reference_tier_mib,omitempty"` // the mount's default; 0: recorded before it was
}

// SeqIO is sequential write and read through ckptfs, go-fuse loopback
// mounts (forwarding, and passthrough) and a plain directory of the same
// disk.
type SeqIO struct {
	FileBytes int64                `json:"file_bytes"`
	Targets   map[string]*SeqTimes `json:"targets"` // ckptfs, loopback, passthrough, plain
	Order     string               `json:"order"`
}

// SeqTimes are one target's write and read times.
type SeqTimes struct {
	Write     []float64 `json:"write_s"`
	Read      []float64 `json:"read_s"`
	WriteMBs  float64   `json:"write_median_mb_s"`
	ReadMBs   float64   `json:"read_median_mb_s"`
	Verified  bool      `json:"verified"`
	DaemonHWM int64     `json:"daemon_peak_rss_bytes,omitempty"`
}

// Training is a real training run checkpointing into the mount beside one
// checkpointing into a plain directory (and one not checkpointing).
type Training struct {
	Command         string    `json:"command"`
	Checkpoints     int       `json:"checkpoints_per_run"`
	CheckpointBytes int64     `json:"checkpoint_bytes"`
	Mount           []float64 `json:"mount_s"`
	Plain           []float64 `json:"plain_s"`
	None            []float64 `json:"no_checkpoint_s"`
	MountMed        float64   `json:"mount_median_s"`
	PlainMed        float64   `json:"plain_median_s"`
	NoneMed         float64   `json:"no_checkpoint_median_s"`
	// Slowdown is the median over repetitions of mount ÷ plain − 1 (the two
	// runs of a repetition are adjacent, so they share the machine's load);
	// PerCheckpoint the median of mount − plain over the checkpoints.
	Slowdown      float64 `json:"slowdown"`
	PerCheckpoint float64 `json:"extra_s_per_checkpoint"`
	StoreRatio    float64 `json:"written_volume_ratio"`
	StoredOverLog float64 `json:"stored_over_logical"`
	Plots         []Plot  `json:"plots"`
}

// Scale is ingest and memory with growing files and concurrent writers.
type Scale struct {
	Sizes     []ScaleRow  `json:"sizes"`
	Writers   []WriterRow `json:"writers"`
	Replay    *ReplayRSS  `json:"replay_4gib"`
	IdleHWM   int64       `json:"daemon_idle_rss_bytes"`
	Generator string      `json:"generator"`
	Limits    ScaleLimits `json:"limits"`
}

// ScaleLimits are the issues' memory bounds, checked against the figures.
type ScaleLimits struct {
	ReplayMaxRSS int64 `json:"replay_max_rss_bytes"` // issue 5
	DaemonMaxRSS int64 `json:"daemon_max_rss_bytes"` // issue 6
}

// ScaleRow is one file size: a baseline and a delta version copied in with
// cp, the delta read back.
type ScaleRow struct {
	Bytes    int64   `json:"bytes"`
	BaseS    float64 `json:"ingest_base_s"`
	DeltaS   float64 `json:"ingest_delta_s"`
	ReadS    float64 `json:"read_s"`
	BaseMBs  float64 `json:"ingest_base_mb_s"`
	DeltaMBs float64 `json:"ingest_delta_mb_s"`
	ReadMBs  float64 `json:"read_mb_s"`
	// PlainS: cp of the same delta file into a plain directory of the
	// same disk, for reference (what the disk itself does at this size).
	PlainS      float64 `json:"plain_cp_s"`
	PlainMBs    float64 `json:"plain_cp_mb_s"`
	StoredRatio float64 `json:"delta_stored_over_logical"`
	Verified    bool    `json:"verified"`
	DaemonHWM   int64   `json:"daemon_peak_rss_bytes"`
}

// WriterRow is n writers each copying a baseline then a delta at once.
type WriterRow struct {
	Writers   int     `json:"writers"`
	FileBytes int64   `json:"file_bytes"`
	WallS     float64 `json:"wall_s"`
	AggMBs    float64 `json:"aggregate_mb_s"`
	Verified  bool    `json:"verified"`
	DaemonHWM int64   `json:"daemon_peak_rss_bytes"`
}

// ReplayRSS is ckptfs replay's peak RSS on two 4 GiB checkpoints, over
// replayRuns runs (the Go heap's peak depends on when the collector gets
// CPU, so one run is not enough); MaxRSS is the largest.
type ReplayRSS struct {
	Command   string    `json:"command"`
	FileBytes int64     `json:"file_bytes"`
	Files     int       `json:"files"`
	Seconds   []float64 `json:"seconds"`
	RSS       []int64   `json:"max_rss_bytes_samples"`
	MaxRSS    int64     `json:"max_rss_bytes"`
	Ratio     float64   `json:"written_volume_ratio"`
}

// Reads are cold reads out of the mount beside a plain directory.
type Reads struct {
	Command            string              `json:"command"`
	DepthCommand       string              `json:"depth_command"`
	Python             string              `json:"python"`
	ReadAheadKiB       int                 `json:"kernel_read_ahead_kib"`
	RefTierMiB         int64               `json:"reference_tier_mib,omitempty"` // as TorchIO's
	CheckpointBytes    int64               `json:"checkpoint_bytes"`
	SafetensorsBytes   int64               `json:"safetensors_bytes"`
	Deepest            int                 `json:"deepest_chain_depth"` // of the .pt files the ops read
	DeepestSafetensors int                 `json:"deepest_chain_depth_safetensors"`
	Identical          bool                `json:"identical"`
	Ops                map[string]*ABTimes `json:"ops"` // load, load_mmap, safe_open, cp_out, verify
	Depth              []DepthRead         `json:"depth"`
	WriteCost          []DepthCost         `json:"write_cost"`
	DaemonHWM          int64               `json:"daemon_peak_rss_bytes"`
}

// DepthRead is cp out of a save at one chain depth, beside a plain copy.
type DepthRead struct {
	Depth  int  `json:"chain_depth"`
	Newest bool `json:"newest"` // the family's newest: in the reference tier
	*ABTimes
}

// DepthCost is a training series replayed under one --max-depth (0: every
// save a baseline, --snap-dis 1): write volume against decodes per chunk.
type DepthCost struct {
	Series             string  `json:"series"`
	MaxDepth           int     `json:"max_depth"`
	WrittenVolumeRatio float64 `json:"written_volume_ratio"`
	MeanDecodes        float64 `json:"mean_decodes_per_chunk"` // over the saves: chain depth + 1
	MaxDecodes         int     `json:"max_decodes_per_chunk"`
}

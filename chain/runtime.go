package chain

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// Runtime is the process's CPU and the Go runtime's share of it, for the
// report: a save must not spend the machine's cores collecting garbage.
type Runtime struct {
	// CPUSeconds is the process's CPU time (user and system, getrusage).
	CPUSeconds float64 `json:"cpu_seconds"`
	// GCCPUSeconds is the runtime's memory management: the collector's
	// marking and pauses and the scavenger (runtime/metrics estimates).
	GCCPUSeconds float64 `json:"gc_cpu_seconds"`
	// GCShare is GCCPUSeconds ÷ CPUSeconds.
	GCShare     float64 `json:"gc_share"`
	GCCycles    uint64  `json:"gc_cycles"`
	HeapBytes   uint64  `json:"heap_bytes"`   // live and unswept heap objects
	MemoryLimit int64   `json:"memory_limit"` // the soft heap limit in force
}

var runtimeSamples = []metrics.Sample{
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
	{Name: "/cpu/classes/scavenge/total:cpu-seconds"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/gc/gomemlimit:bytes"},
}

// ReadRuntime samples this process's runtime.
func ReadRuntime() Runtime {
	s := make([]metrics.Sample, len(runtimeSamples))
	copy(s, runtimeSamples)
	metrics.Read(s)
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	r := Runtime{CPUSeconds: cpu, GCCPUSeconds: f(0) + f(1), GCCycles: u(2), HeapBytes: u(3), MemoryLimit: int64(u(4))}
	if cpu > 0 {
		r.GCShare = r.GCCPUSeconds / cpu
	}
	return r
}

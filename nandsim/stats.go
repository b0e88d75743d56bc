package nandsim

import "math"

// Stats is a snapshot of the device's counters. Workload counters (host
// pages, programs, GC, erases, trims, times) start at zero on Open of a
// fresh device and after Precondition or ResetCounters; the erase-count
// distribution covers the blocks' whole life.
type Stats struct {
	PageSize      int   `json:"page_size"`
	LogicalPages  int64 `json:"logical_pages"`
	PhysicalPages int64 `json:"physical_pages"`
	Blocks        int64 `json:"blocks"`

	HostPagesWritten int64 `json:"host_pages_written"`
	HostPagesRead    int64 `json:"host_pages_read"`
	// PagesProgrammed = host pages written + GC copies.
	PagesProgrammed int64 `json:"pages_programmed"`
	GCPagesCopied   int64 `json:"gc_pages_copied"`
	GCRuns          int64 `json:"gc_runs"`
	Erases          int64 `json:"erases"`
	// TrimmedPages counts pages the host trimmed, mapped or not.
	TrimmedPages int64 `json:"trimmed_pages"`
	// WAF = PagesProgrammed / HostPagesWritten, 0 before any write.
	WAF float64 `json:"waf"`

	ValidPages   int64 `json:"valid_pages"`
	InvalidPages int64 `json:"invalid_pages"`
	FreeBlocks   int64 `json:"free_blocks"`

	EraseCountMin    int64      `json:"erase_count_min"`
	EraseCountMean   float64    `json:"erase_count_mean"`
	EraseCountMax    int64      `json:"erase_count_max"`
	EraseCountStddev float64    `json:"erase_count_stddev"`
	EraseHistogram   []EraseBin `json:"erase_histogram"`

	// ChannelBusyMs is the summed duration of the operations on each
	// channel's chips; ElapsedMs is the simulated time until all of them
	// completed (channels overlap), since the counters were reset.
	ChannelBusyMs []float64 `json:"channel_busy_ms"`
	ElapsedMs     float64   `json:"elapsed_ms"`
}

// EraseBin counts the blocks erased between Lo and Hi times, inclusive.
type EraseBin struct {
	Lo     int64 `json:"lo"`
	Hi     int64 `json:"hi"`
	Blocks int64 `json:"blocks"`
}

// maxEraseBins bounds the histogram; narrower spreads get one bin per count.
const maxEraseBins = 32

// Stats returns a copy of the device's statistics.
func (s *SSD) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.stats()
}

func (f *ftl) stats() Stats {
	st := Stats{
		PageSize:         f.cfg.PageSize,
		LogicalPages:     f.cfg.LogicalPages(),
		PhysicalPages:    f.cfg.PhysicalPages(),
		Blocks:           f.cfg.TotalBlocks(),
		HostPagesWritten: f.ctr.hostWritten,
		HostPagesRead:    f.ctr.hostRead,
		PagesProgrammed:  f.ctr.programmed,
		GCPagesCopied:    f.ctr.gcCopied,
		GCRuns:           f.ctr.gcRuns,
		Erases:           f.ctr.erases,
		TrimmedPages:     f.ctr.trimmed,
		ChannelBusyMs:    append([]float64(nil), f.clock.busy...),
		ElapsedMs:        f.clock.now(),
	}
	if st.HostPagesWritten > 0 {
		st.WAF = float64(st.PagesProgrammed) / float64(st.HostPagesWritten)
	}
	var programmed int64
	for b, state := range f.state {
		st.ValidPages += int64(f.valid[b])
		if state == blockClosed {
			programmed += int64(f.pages)
		}
	}
	for d := range f.dies {
		st.FreeBlocks += int64(f.dies[d].free.n)
		for _, fr := range []frontier{f.dies[d].host, f.dies[d].gc} {
			if fr.block >= 0 {
				programmed += int64(fr.next)
			}
		}
	}
	st.InvalidPages = programmed - st.ValidPages
	st.EraseCountMin, st.EraseCountMax, st.EraseCountMean, st.EraseCountStddev, st.EraseHistogram = eraseSpread(f.erases)
	return st
}

func eraseSpread(erases []uint32) (lo, hi int64, mean, stddev float64, hist []EraseBin) {
	if len(erases) == 0 {
		return 0, 0, 0, 0, nil
	}
	lo, hi = math.MaxInt64, 0
	var sum, sumSq float64
	for _, e := range erases {
		lo, hi = min(lo, int64(e)), max(hi, int64(e))
		sum += float64(e)
		sumSq += float64(e) * float64(e)
	}
	n := float64(len(erases))
	mean = sum / n
	stddev = math.Sqrt(max(sumSq/n-mean*mean, 0))
	width := (hi - lo + maxEraseBins) / maxEraseBins // ceil((hi-lo+1)/bins)
	bins := (hi-lo)/width + 1
	hist = make([]EraseBin, bins)
	for i := range hist {
		hist[i].Lo = lo + int64(i)*width
		hist[i].Hi = min(hist[i].Lo+width-1, hi)
	}
	for _, e := range erases {
		hist[(int64(e)-lo)/width].Blocks++
	}
	return lo, hi, mean, stddev, hist
}

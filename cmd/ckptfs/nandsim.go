package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/nandsim"
)

func init() { subcommands = append(subcommands, newNandsimCommand) }

// nandsimReport is the --json output: the headline numbers at the top
// level, the full device statistics under "stats".
type nandsimReport struct {
	Workload         string         `json:"workload"`
	Policy           string         `json:"policy"`
	Passes           float64        `json:"passes"`
	Seed             uint64         `json:"seed"`
	WAF              float64        `json:"waf"`
	Erases           int64          `json:"erases"`
	HostPagesWritten int64          `json:"host_pages_written"`
	GCPagesCopied    int64          `json:"gc_pages_copied"`
	PagesProgrammed  int64          `json:"pages_programmed"`
	ElapsedMs        float64        `json:"elapsed_ms"`
	Band             wafBand        `json:"analytical_band"`
	EffectiveBand    wafBand        `json:"analytical_band_effective"`
	Config           nandsim.Config `json:"config"`
	Stats            nandsim.Stats  `json:"stats"`
	Verdict          verdict        `json:"verdict"`
}

// verdict is the self-check's outcome: PASS, FAIL, or NONE where no
// analytical expectation applies, and why.
type verdict struct {
	Result string `json:"result"`
	Reason string `json:"reason"`
}

// Tolerances of the verdict (docs/NANDSIM.md, "Self-check verdict").
// Without a reserve the band is the analytical one; the measurement lies
// inside it on devices of 512 and more blocks per die and up to 2.4% above
// it on 128, so 3%. With a reserve the band is taken at EffectiveAlpha,
// which removes the midpoint of the GC watermarks from the spare; that
// model over-counts what GC holds back, and the measurement sits a steady
// 2.1% to 3.1% below the band's lower edge on every geometry and seed
// tried (1x512 to 8x256, seeds 1-3), so 5%.
const (
	bandTolerance          = 0.03
	effectiveBandTolerance = 0.05
)

// judge compares a run with what is expected of it.
func judge(r nandsimReport) verdict {
	switch {
	case r.Workload == string(nandsim.Sequential):
		if math.Round(r.WAF*1000) == 1000 && r.GCPagesCopied == 0 {
			return verdict{"PASS", "sequential overwrite: WAF 1.000 and no GC copies"}
		}
		return verdict{"FAIL", fmt.Sprintf("sequential overwrite gave WAF %.3f and %d GC copies; want 1.000 and none", r.WAF, r.GCPagesCopied)}
	case r.Workload != string(nandsim.Random) || r.Policy != string(nandsim.Greedy):
		return verdict{"NONE", "the analytical band is for greedy GC under uniform random writes; this run is compared with nothing"}
	}
	band, tol, which := r.Band, bandTolerance, "the greedy band"
	if r.Config.GCReserve > 0 {
		band, tol, which = r.EffectiveBand, effectiveBandTolerance, "the greedy band at the effective alpha (less the free blocks GC holds back)"
	}
	lo, hi := band.Lower*(1-tol), band.Upper*(1+tol)
	where := fmt.Sprintf("WAF %.3f against %s %.3f..%.3f, %.0f%% either side allowed (%.3f..%.3f)", r.WAF, which, band.Lower, band.Upper, 100*tol, lo, hi)
	if r.WAF < lo || r.WAF > hi {
		return verdict{"FAIL", where}
	}
	return verdict{"PASS", where}
}

// wafBand is GreedyWAFBand at a given alpha (physical / logical pages).
type wafBand struct {
	Alpha float64 `json:"alpha"`
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
}

func bandAt(alpha float64) wafBand {
	lo, hi := nandsim.GreedyWAFBand(alpha)
	return wafBand{Alpha: alpha, Lower: lo, Upper: hi}
}

func newNandsimCommand() *cobra.Command {
	cfg := nandsim.DefaultConfig()
	cfg.Channels, cfg.BlocksPerChip = 4, 512 // small enough to overwrite many times in a second
	var (
		workload, policy string
		w                nandsim.Workload
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "nandsim",
		Short: "Run the simulated SSD's self-check workload and print its write amplification",
		Long: `nandsim fills a small simulated SSD (Table 4 timings, page-mapped FTL), writes
--warmup device capacities to reach steady state, then measures --passes more
capacities of the chosen workload: seq (sequential overwrite, WAF must be 1.000),
random (uniform 4 KiB overwrites; compare with the analytical greedy band) or
hotcold (80% of writes to 20% of the pages). It prints WAF, page and erase counts,
the erase-count spread and the simulated time, then a verdict: PASS or FAIL
(exit status 1) against WAF 1.000 for seq and against the analytical greedy
band for random with greedy GC (docs/NANDSIM.md says how wide), NONE for the
runs no formula predicts (hotcold, cost-benefit).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Policy = nandsim.Policy(policy)
			w.Kind = nandsim.WorkloadKind(workload)
			if !cmd.Flags().Changed("high-water") {
				cfg.GCHighWater = cfg.GCReserve + 0.005
			}
			s, err := nandsim.Open(cfg, nandsim.Options{})
			if err != nil {
				return err
			}
			defer s.Close()
			if err := nandsim.RunWorkload(s, w); err != nil {
				return err
			}
			st := s.Stats()
			rep := nandsimReport{
				Workload: workload, Policy: policy, Passes: w.Passes, Seed: w.Seed,
				WAF: st.WAF, Erases: st.Erases, HostPagesWritten: st.HostPagesWritten,
				GCPagesCopied: st.GCPagesCopied, PagesProgrammed: st.PagesProgrammed,
				ElapsedMs: st.ElapsedMs, Band: bandAt(cfg.Alpha()),
				EffectiveBand: bandAt(cfg.EffectiveAlpha()), Config: cfg, Stats: st,
			}
			rep.Verdict = judge(rep)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := printNandsimReport(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if rep.Verdict.Result == "FAIL" {
				return fmt.Errorf("self-check failed: %s", rep.Verdict.Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workload, "workload", "random", "write pattern: seq, random or hotcold")
	f.Float64Var(&w.Passes, "passes", 4, "device capacities written in the measured phase")
	f.Float64Var(&w.WarmupPasses, "warmup", 2, "device capacities written after the fill and before measuring")
	f.Uint64Var(&w.Seed, "seed", 1, "seed of the random workloads")
	f.StringVar(&policy, "policy", string(nandsim.Greedy), "GC victim policy: greedy or cost-benefit")
	f.Float64Var(&cfg.OverProvisioning, "op", cfg.OverProvisioning, "over-provisioning: share of physical pages hidden from the host")
	f.Float64Var(&cfg.GCReserve, "reserve", cfg.GCReserve, "GC starts when free blocks fall under this share of a die's blocks")
	f.Float64Var(&cfg.GCHighWater, "high-water", 0, "GC cleans until this share of a die's blocks is free (default reserve + 0.005)")
	f.IntVar(&cfg.Channels, "channels", cfg.Channels, "channels")
	f.IntVar(&cfg.ChipsPerChannel, "chips", cfg.ChipsPerChannel, "chips per channel")
	f.IntVar(&cfg.BlocksPerChip, "blocks", cfg.BlocksPerChip, "blocks per chip (Table 4 has 16384)")
	f.IntVar(&cfg.PagesPerBlock, "pages", cfg.PagesPerBlock, "pages per block")
	f.IntVar(&cfg.PageSize, "page-size", cfg.PageSize, "page size in bytes")
	f.BoolVar(&cfg.SharedBus, "shared-bus", false, "one bus for all host transfers instead of one per channel")
	f.BoolVar(&asJSON, "json", false, "print a JSON object instead of a table")
	return cmd
}

func printNandsimReport(out io.Writer, r nandsimReport) error {
	c, st := r.Config, r.Stats
	fmt.Fprintf(out, "nandsim self-check: %s workload, %s GC, seed %d\n", r.Workload, r.Policy, r.Seed)
	fmt.Fprintf(out, "device: %d ch x %d chip x %d blocks x %d pages x %d B; OP %.1f%%, GC reserve %.1f%% (clean to %.1f%%)\n\n",
		c.Channels, c.ChipsPerChannel, c.BlocksPerChip, c.PagesPerBlock, c.PageSize,
		100*c.OverProvisioning, 100*c.GCReserve, 100*c.GCHighWater)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("measured", "%.1f device capacities after a fill and warm-up", r.Passes)
	row("WAF", "%.3f", st.WAF)
	row("host pages written", "%d", st.HostPagesWritten)
	row("pages programmed", "%d", st.PagesProgrammed)
	row("GC pages copied", "%d", st.GCPagesCopied)
	row("GC runs", "%d", st.GCRuns)
	row("erases", "%d", st.Erases)
	row("erase count min/mean/max", "%d / %.2f / %d (stddev %.2f)", st.EraseCountMin, st.EraseCountMean, st.EraseCountMax, st.EraseCountStddev)
	busyLo, busyHi := st.ChannelBusyMs[0], st.ChannelBusyMs[0]
	for _, b := range st.ChannelBusyMs {
		busyLo, busyHi = min(busyLo, b), max(busyHi, b)
	}
	row("simulated time", "%.1f ms elapsed; channels busy %.1f..%.1f ms", st.ElapsedMs, busyLo, busyHi)
	if r.Workload != string(nandsim.Sequential) {
		row("greedy band, uniform random", "%.3f .. %.3f at alpha %.4f (OP as configured)", r.Band.Lower, r.Band.Upper, r.Band.Alpha)
		row("", "%.3f .. %.3f at alpha %.4f (less the free blocks GC holds back)", r.EffectiveBand.Lower, r.EffectiveBand.Upper, r.EffectiveBand.Alpha)
	} else {
		row("expected", "WAF 1.000, no GC copies")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\n%s: %s\n", r.Verdict.Result, r.Verdict.Reason)
	return err
}

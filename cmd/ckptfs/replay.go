package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/replay"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func init() { subcommands = append(subcommands, newReplayCommand) }

// compareMethod is one column of the paper's Fig. 9/10, plus ours.
type compareMethod struct {
	Name    string
	Codec   encode.Codec
	Scheme  policy.Scheme
	AllBase bool // every version a full snapshot (snap_dis 1)
}

// paperMethods are the seven methods of the paper's Fig. 9 and Fig. 10, in
// its order, then planes under both schemes.
var paperMethods = []compareMethod{
	{"complete", encode.Stored, policy.Progressive, true},
	{"GZIP+complete", encode.Gzip, policy.Progressive, true},
	{"GZIP+delta", encode.Gzip, policy.Progressive, false},
	{"RLE(4)", encode.RLE4, policy.Progressive, false},
	{"RLE(4)+GZIP", encode.RLE4Gzip, policy.Progressive, false},
	{"DynRLE_pr", encode.DynRLE, policy.Progressive, false},
	{"DynRLE_ch", encode.DynRLE, policy.ChainScheme, false},
	{"planes_pr", encode.Planes, policy.Progressive, false},
	{"planes_ch", encode.Planes, policy.ChainScheme, false},
}

// compareRow is one method's result in --compare.
type compareRow struct {
	Method  string         `json:"method"`
	Codec   string         `json:"codec"`
	Scheme  string         `json:"scheme"`
	SnapDis string         `json:"snap_dis"`
	Result  *replay.Result `json:"result"`
}

func newReplayCommand() *cobra.Command {
	var (
		pf                            policyFlags
		precondition, keep            string
		asJSON, compare, quiet, files bool
		workDir, deviceSize           string
		interval                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "replay [flags] FILES...",
		Short: "Feed existing checkpoint files through ckptfs's pipeline offline and report the savings",
		Long: `replay saves FILES, in the order given, into a fresh throw-away store (a
simulated SSD and its shadow, no mount), reads every file back and checks it
byte for byte, and prints the report: per file (logical and stored bytes,
device pages written, chain depth, simulated save and restore time) and in
total (written_volume_ratio, erase_ratio, WAF, erases, useful_storage_pages,
lifetime). Paths keep their layout below the files' common directory, so
checkpoint-N/pytorch_model.bin files form one family as in a mount.

--compare runs the paper's seven methods (complete, GZIP+complete, GZIP+delta,
RLE(4), RLE(4)+GZIP, DynRLE progressive, DynRLE chain) and planes under both
schemes on the same files, and prints one table like the paper's Fig. 9/10.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pol, err := pf.policy()
			if err != nil {
				return err
			}
			dev, err := deviceForSize(deviceSize)
			if err != nil {
				return err
			}
			o := replay.Options{Policy: pol, WorkDir: workDir, Interval: interval, Device: dev, Opened: limitMemoryFor}
			switch precondition {
			case "none":
			case "paper":
				o.Precondition = true
			default:
				return fmt.Errorf("--precondition %q: want none or paper", precondition)
			}
			switch keep {
			case "all":
			case "latest":
				o.KeepLatest = true
			default:
				return fmt.Errorf("--keep %q: want all or latest", keep)
			}
			out := cmd.OutOrStdout()
			var progress io.Writer
			if !quiet {
				progress = progressTo(cmd.ErrOrStderr())
			}
			if !compare {
				res, err := runReplay(args, o, "replay", progress)
				if err != nil {
					return err
				}
				noTensorsNote(cmd.ErrOrStderr(), args, res.Steps)
				if asJSON {
					return writeJSON(out, res)
				}
				printSteps(out, res.Steps)
				fmt.Fprintln(out)
				printReport(out, &res.Report, files)
				return nil
			}
			var rows []compareRow
			for _, m := range paperMethods {
				p := pol
				p.Codec, p.Scheme = m.Codec, m.Scheme
				if m.AllBase {
					p.SnapDis = 1
				}
				o.Policy = p
				res, err := runReplay(args, o, m.Name, progress)
				if err != nil {
					return fmt.Errorf("%s: %w", m.Name, err)
				}
				if len(rows) == 0 {
					noTensorsNote(cmd.ErrOrStderr(), args, res.Steps)
				}
				rows = append(rows, compareRow{Method: m.Name, Codec: p.Codec.String(), Scheme: p.Scheme.String(),
					SnapDis: policy.FormatSnapDis(p.SnapDis), Result: res})
			}
			if asJSON {
				return writeJSON(out, map[string]any{"methods": rows})
			}
			printCompare(out, rows)
			return nil
		},
	}
	fl := cmd.Flags()
	pf.register(fl)
	fl.StringVar(&precondition, "precondition", "none", "device state before the workload: none (fresh) or paper (Table 8, so GC and erases happen)")
	fl.StringVar(&keep, "keep", "all", "all: keep every file; latest: delete older files of a family once a newer one is saved (Algorithm 2)")
	fl.BoolVar(&asJSON, "json", false, "print JSON with the metric names of docs/ARCHITECTURE.md as keys")
	fl.BoolVar(&compare, "compare", false, "run the paper's seven methods and planes and print one table")
	fl.BoolVar(&quiet, "quiet", false, "no progress bar (there is none unless stderr is a terminal)")
	fl.BoolVar(&files, "files", false, "also list the files kept at the end")
	fl.StringVar(&deviceSize, "device-size", "", "physical size of the simulated SSD, e.g. 64MiB (default and \"paper\": the paper's 32 GiB device)")
	fl.StringVar(&workDir, "work-dir", "", "directory for the throw-away store (default: the system temp dir)")
	fl.DurationVar(&interval, "interval", 20*time.Minute, "time between checkpoints, for the lifetime projection")
	return cmd
}

// progressTo is where replay draws its progress bar: w when it is a
// terminal, else nowhere (nil), so logs and pipes get no bar.
func progressTo(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return f
}

// noTensorsNote says which files no detector found tensors in: replay
// stored them as plain bytes, so their rows say nothing about checkpoints.
// Steps follow files in order; a step's path is relative to the files'
// common directory, so the note names the file as given.
func noTensorsNote(out io.Writer, files []string, steps []replay.Step) {
	for i, s := range steps {
		if s.Format == "generic" || s.Format == "unknown" {
			name := s.Path
			if len(steps) == len(files) {
				name = files[i]
			}
			fmt.Fprintf(out, "no tensors found in %s: it is stored as raw bytes\n", name)
		}
	}
}

func runReplay(files []string, o replay.Options, label string, progress io.Writer) (*replay.Result, error) {
	if progress != nil {
		bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(progress), progressbar.OptionSetDescription(label),
			progressbar.OptionShowBytes(true), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
		o.Progress = func(done, total int64) {
			bar.ChangeMax64(total)
			_ = bar.Set64(done)
		}
		defer bar.Finish()
	}
	return replay.Run(files, o)
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSteps(out io.Writer, steps []replay.Step) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tLOGICAL\tSTORED\tRATIO\tDEV PAGES\tPLAIN PAGES\tDEPTH\tSAVE ms\tRESTORE ms\tUSEFUL PAGES\tVERIFIED")
	for _, s := range steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%s\t%v\n", s.Path, thousands(s.LogicalBytes),
			thousands(s.StoredBytes), ratioString(s.StoredBytes, s.LogicalBytes), thousands(s.DevicePagesWritten),
			thousands(s.ShadowPagesWritten), s.Depth, s.SaveMs, s.RestoreMs, thousands(s.UsefulPages), s.Verified)
	}
	tw.Flush()
}

func printCompare(out io.Writer, rows []compareRow) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tCODEC\tSCHEME\tSNAP_DIS\tWRITTEN BYTES\tWRITTEN_VOLUME_RATIO\tERASES\tERASE_RATIO\tUSEFUL PAGES\tMEAN SAVE ms\tMEAN RESTORE ms")
	for _, r := range rows {
		rep := r.Result.Report
		er := "-"
		if rep.EraseRatio != nil {
			er = fmt.Sprintf("%.3f", *rep.EraseRatio)
		}
		var save, restore float64
		for _, s := range r.Result.Steps {
			save += s.SaveMs
			restore += s.RestoreMs
		}
		n := float64(len(r.Result.Steps))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%.1f\t%.1f\n", r.Method, r.Codec, r.Scheme, r.SnapDis,
			thousands(rep.Device.HostPagesWritten*int64(rep.Device.PageSize)), rep.WrittenVolumeRatio,
			thousands(rep.Device.Erases), er, thousands(rep.UsefulStoragePages), save/n, restore/n)
	}
	tw.Flush()
}

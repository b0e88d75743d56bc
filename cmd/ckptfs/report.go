package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/chain/replay"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

func init() { subcommands = append(subcommands, newReportCommand) }

// reportStep is one replay step as the charts read it. DeviceErases and
// ShadowErases (cumulative erases after the step) are not part of chain's
// replay.Step; a tool that measured them (the benchmark driver does, from
// replays of each prefix of the files) may add them, and the cumulative
// erase chart is drawn only when every step has them.
type reportStep struct {
	replay.Step
	DeviceErases *int64 `json:"device_erases,omitempty"`
	ShadowErases *int64 `json:"shadow_erases,omitempty"`
}

// reportMethod is one configuration's result: a replay, one method of a
// --compare run, or a store.
type reportMethod struct {
	Name   string
	Report storedir.Report
	Steps  []reportStep
}

// reportData is what the page is drawn from, whatever the source.
type reportData struct {
	Kind     string // "replay", "compare" or "store"
	Source   string // the file or store directory read
	Methods  []reportMethod
	Selected int // the method whose histogram and depth are drawn
}

func (d *reportData) selected() *reportMethod { return &d.Methods[d.Selected] }

func newReportCommand() *cobra.Command {
	var store, from, out, method string
	cmd := &cobra.Command{
		Use:   "report (--store DIR | --from REPLAY.json) --out DIR",
		Short: "Draw a store's or a replay's figures as PNG charts and an HTML page",
		Long: `report writes OUT/index.html and the PNG charts it shows:

  bytes_written.png      per checkpoint: bytes ckptfs wrote beside a plain filesystem
  cumulative_erases.png  per checkpoint: erases so far (needs device_erases and
                         shadow_erases in the steps; replay does not record them)
  erase_histogram.png    how often the blocks were erased, ckptfs beside plain
  chain_depth.png        deltas between each checkpoint and its baseline
  methods_written.png,   --compare input only: total bytes written and erases per
  methods_erases.png     method (the paper's Fig. 9 and Fig. 10)
  stored_vs_logical.png  --store only: each file's stored bytes beside its size

--from reads the output of "ckptfs replay --json" with or without --compare
(--method picks which method's histogram is drawn; default planes_pr).
--store reads an unmounted store; a store keeps no per-save history, so its
page shows each live file's stored and logical size instead of per-checkpoint
bytes written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			var d *reportData
			var err error
			switch {
			case store != "" && from != "":
				return errors.New("give --store or --from, not both")
			case store != "":
				d, err = loadStoreReport(store)
			case from != "":
				d, err = loadReplayReport(from, method)
			default:
				return errors.New("give --store DIR or --from REPLAY.json")
			}
			if err != nil {
				return err
			}
			files, err := writeReport(d, out)
			if err != nil {
				return err
			}
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, f))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&store, "store", "", "read an unmounted store directory")
	fl.StringVar(&from, "from", "", "read the JSON of ckptfs replay --json (with or without --compare)")
	fl.StringVar(&out, "out", "", "directory to write index.html and the PNG charts to (created if missing)")
	fl.StringVar(&method, "method", "planes_pr", "with a --compare input: the method whose erase histogram and chain depth are drawn")
	return cmd
}

// loadStoreReport opens an unmounted store with the policy it was last used
// with and takes its report.
func loadStoreReport(dir string) (*reportData, error) {
	ds, err := openUnmountedStore(dir, "unmount it first")
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	rep, err := ds.Report(storedir.ReportOptions{})
	if err != nil {
		return nil, fmt.Errorf("report of %s: %w", dir, err)
	}
	return &reportData{Kind: "store", Source: dir, Methods: []reportMethod{{Name: "ckptfs", Report: *rep}}}, nil
}

// loadReplayReport reads replay --json output, plain or --compare.
func loadReplayReport(path, method string) (*reportData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Methods []struct {
			Method string `json:"method"`
			Result *struct {
				storedir.Report
				Steps []reportStep `json:"steps"`
			} `json:"result"`
		} `json:"methods"`
		Steps []reportStep `json:"steps"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &reportData{Source: path}
	if len(probe.Methods) > 0 {
		d.Kind = "compare"
		for i, m := range probe.Methods {
			if m.Result == nil || len(m.Result.Steps) == 0 {
				return nil, fmt.Errorf("%s: method %d (%q) has no result steps", path, i, m.Method)
			}
			d.Methods = append(d.Methods, reportMethod{Name: m.Method, Report: m.Result.Report, Steps: m.Result.Steps})
			if m.Method == method {
				d.Selected = i
			}
		}
		return d, sameCheckpoints(d)
	}
	if len(probe.Steps) == 0 {
		return nil, fmt.Errorf("%s: neither replay steps nor --compare methods: not the output of ckptfs replay --json", path)
	}
	var one replay.Result
	if err := json.Unmarshal(b, &one); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Kind = "replay"
	d.Methods = []reportMethod{{Name: one.Codec + " " + one.Scheme, Report: one.Report, Steps: probe.Steps}}
	return d, nil
}

// sameCheckpoints checks that every method replayed the same files, so that
// per-checkpoint lines share one x axis.
func sameCheckpoints(d *reportData) error {
	first := d.Methods[0].Steps
	for _, m := range d.Methods[1:] {
		if len(m.Steps) != len(first) {
			return fmt.Errorf("%s: method %s has %d steps, %s has %d", d.Source, m.Name, len(m.Steps), d.Methods[0].Name, len(first))
		}
		for i := range first {
			if m.Steps[i].Path != first[i].Path {
				return fmt.Errorf("%s: step %d is %s in %s but %s in %s", d.Source, i, m.Steps[i].Path, m.Name, first[i].Path, d.Methods[0].Name)
			}
		}
	}
	return nil
}

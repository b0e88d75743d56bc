package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

func init() { subcommands = append(subcommands, newRepackCommand) }

// repackOutput is `ckptfs repack --json`: the plan and what writing it cost
// the simulated device.
type repackOutput struct {
	*chain.RepackReport
	// Device figures of the repack itself: host pages written (chunks
	// and metadata), pages programmed (with GC copies) and erases.
	DevicePagesWritten    int64 `json:"device_pages_written"`
	DevicePagesProgrammed int64 `json:"device_pages_programmed"`
	DeviceErases          int64 `json:"device_erases"`
	// SavePages is what a save of this run wrote to the device on average
	// before the repack (host pages ÷ versions committed); SavesCost the
	// repack's writes in saves of that size.
	SavePages int64   `json:"average_save_pages"`
	SavesCost float64 `json:"saves_cost"`
}

func newRepackCommand() *cobra.Command {
	var store string
	var maxDepth, window, exactNewest, exactEvery int
	var lossy, moments, codec string
	var families []string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "repack --store DIR [--max-depth K] [--window W] [--family PATTERN]... [--codec C] [--lossy bf16 [--lossy-moments m4] [--exact-newest N] [--exact-every M]] [--dry-run]",
		Short: "Re-plan a finished run: fewest stored bytes with reads bounded to K+1 decodes",
		Long: `repack re-plans the chains of an unmounted store. For each family (a
checkpoint series) it chooses which files are stored whole and which as deltas
against one of the W files saved just before them (--window, 4 by default;
1 plans chains), so that the family stores the fewest bytes while a read of
any file decodes at most K+1 chunks per chunk (--max-depth K; the store's
policy bound by default). Several files coded against one baseline store less
than a chain at a small K. It measures what it needs by encoding
without writing, then re-codes the files the plan changes, one transaction
each, oldest first: a kill at any moment loses nothing, and running repack
again finishes the plan. Versions kept only as references (of files rewritten
in place) are freed when no file needs them. Every file reads back
byte-identical. The re-coding's writes are charged to the simulated SSD like
any save's, and the summary says how many saves of the run they cost.

--codec C re-codes every exact file with tensor codec C and makes C the
store's codec for the mounts to come. --codec split16 is what the precision
view (.ckptfs/view/bf16 in a mount) reads fastest: it decodes the high 16
bits of each float32 alone. It stores more than the default codec (2-27% per
tensor role; docs/ARCHIVE.md), and no dry run measures it.

--lossy bf16 is an archive tier, and with a mount's --tier the only way
anything in ckptfs becomes lossy: in each family, every file but the newest --exact-newest (3) and every
--exact-every-th (none by default) has its float32 tensors rounded to the
nearest bfloat16 and kept as float32, in the same file format (a torch.save
zip's CRCs are rewritten), so torch.load and safetensors read it unchanged.
--lossy-moments m4 rounds the optimizer moments of torch.save files
(exp_avg, exp_avg_sq, momentum_buffer, ...: the storages data.pkl names so)
to 4 mantissa bits instead (relative error 2^-5), marked bf16+m4.
Exact files are never coded against lossy ones. The tier swaps one part of
the plan (at most 4(K+1) files) per transaction, newest first: a kill leaves
each file exact or tiered as its mark says. A tiered file says so:
user.ckptfs.fidelity, ckptfs stats. It cannot be undone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return errors.New("--store is required")
			}
			if _, err := os.Stat(filepath.Join(store, remote.StateFile)); err == nil && !dryRun {
				return fmt.Errorf("store %s keeps a replica in an object store (%s): repack would re-code versions the bucket holds as they were; it does not support replicated stores yet", store, remote.StateFile)
			}
			ds, err := openUnmountedStore(store, "unmount it first")
			if err != nil {
				return err
			}
			defer ds.Close()
			if !cmd.Flags().Changed("max-depth") {
				maxDepth = ds.Store.Policy().MaxDepth
			}
			if window < 1 {
				return fmt.Errorf("--window %d: must be at least 1", window)
			}
			opts := chain.RepackOptions{MaxDepth: maxDepth, Window: window, DryRun: dryRun, ExactNewest: exactNewest,
				ExactEvery: exactEvery, Families: families}
			if codec != "" {
				c, err := encode.ParseCodec(codec)
				if err != nil {
					return fmt.Errorf("--codec: %w", err)
				}
				if dryRun {
					return errors.New("--codec: a dry run does not measure another codec")
				}
				opts.Codec = &c
			}
			if lossy != "" {
				if opts.Lossy, err = encode.LossyByName(lossy); err != nil {
					return fmt.Errorf("--lossy: %w", err)
				}
				if moments != "" {
					if opts.LossyMoments, err = encode.LossyByName(moments); err != nil {
						return fmt.Errorf("--lossy-moments: %w", err)
					}
				}
			} else if cmd.Flags().Changed("exact-newest") || cmd.Flags().Changed("exact-every") || moments != "" {
				return errors.New("--exact-newest, --exact-every and --lossy-moments choose the tier of --lossy: give --lossy too")
			}
			var saves uint64
			_ = ds.Medium.DB.View(func(tx *meta.Tx) error {
				saves = tx.Counter("versions_committed")
				return nil
			})
			before := ds.Medium.Dev.Stats()
			rep, err := ds.Store.Repack(opts)
			if err != nil {
				return err
			}
			if err := ds.Sync(); err != nil {
				return err
			}
			after := ds.Medium.Dev.Stats()
			out := repackOutput{RepackReport: rep,
				DevicePagesWritten:    after.HostPagesWritten - before.HostPagesWritten,
				DevicePagesProgrammed: after.PagesProgrammed - before.PagesProgrammed,
				DeviceErases:          after.Erases - before.Erases}
			if saves > 0 {
				out.SavePages = before.HostPagesWritten / int64(saves)
			}
			if out.SavePages > 0 {
				out.SavesCost = float64(out.DevicePagesWritten) / float64(out.SavePages)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			printRepack(cmd.OutOrStdout(), store, &out)
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "store directory to repack (not mounted)")
	cmd.Flags().IntVar(&maxDepth, "max-depth", 0, "deltas allowed between any file and its baseline: a read decodes at most this plus one chunks per chunk (default: the store's policy)")
	cmd.Flags().IntVar(&window, "window", 4, "how many of the files saved just before a file it may be coded against (1: the one before only); narrowed at large --max-depth")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan and print, write nothing")
	cmd.Flags().StringArrayVar(&families, "family", nil, "only the families whose names match this pattern (as ckptfs stats prints them, e.g. 'run/checkpoint-#/*'); repeatable")
	cmd.Flags().StringVar(&codec, "codec", "", "re-code every exact file with this tensor codec, and make it the store's (split16: what the bf16 view reads fastest)")
	cmd.Flags().StringVar(&lossy, "lossy", "", "archive tier: round the float32 tensors of files outside the exact tier (bf16); nothing is lossy without it")
	cmd.Flags().StringVar(&moments, "lossy-moments", "", "with --lossy: round the optimizer moments of torch.save files (exp_avg, exp_avg_sq, momentum_buffer, ...) to this scheme instead (m4: 4 mantissa bits, relative error 2^-5)")
	cmd.Flags().IntVar(&exactNewest, "exact-newest", 3, "with --lossy: the newest files of each family that stay exact")
	cmd.Flags().IntVar(&exactEvery, "exact-every", 0, "with --lossy: also keep every M-th file of each family exact (0: none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func printRepack(w io.Writer, store string, o *repackOutput) {
	r := o.RepackReport
	verb := "repacked"
	if r.DryRun {
		verb = "plan for"
	}
	fmt.Fprintf(w, "%s %s: at most %d %s per chain (a read decodes at most %d %s per chunk), deltas against the %d %s before\n",
		verb, store, r.MaxDepth, plural(r.MaxDepth, "delta", "deltas"), r.MaxDepth+1, plural(r.MaxDepth+1, "chunk", "chunks"),
		r.Window, plural(r.Window, "file", "files"))
	if r.Codec != "" {
		fmt.Fprintf(w, "codec %s: every exact file re-coded with it; the store's codec from now on\n", r.Codec)
	}
	if r.Lossy != "" {
		fmt.Fprintf(w, "LOSSY tier %s: %s\n", r.Lossy, r.Bound)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	lossyCols := ""
	if r.Lossy != "" {
		lossyCols = "lossy\ttiered now\tleft exact (format)\t"
	}
	fmt.Fprintln(tw, "family\tfiles\tstored before\tstored planned\tdecodes before\tdecodes planned\tbaselines\tfurther back\tre-coded\t"+lossyCols)
	for _, f := range sortedNaturally(r.Families, func(f chain.RepackFamily) string { return f.Name }) {
		planned := thousands(f.Planned)
		if f.Kept {
			planned = "kept"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t", f.Name, f.Files, thousands(f.StoredBefore), planned,
			f.WorstDecodesBefore, f.WorstDecodesPlanned, f.Baselines, f.FarDeltas, f.Recoded)
		if r.Lossy != "" {
			fmt.Fprintf(tw, "%d\t%d\t%d\t", f.Lossy, f.Tiered, f.Untierable)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %d codings measured, nothing written\n", r.Measured)
		return
	}
	fmt.Fprintf(w, "stored bytes: %s -> %s (%s); worst decodes per chunk: %d -> %d; versions kept: %d -> %d\n",
		thousands(r.StoredBefore), thousands(r.StoredAfter), ratioString(r.StoredAfter, r.StoredBefore),
		r.WorstDecodesBefore, r.WorstDecodesAfter, r.VersionsBefore, r.VersionsAfter)
	fmt.Fprintf(w, "written: %d versions re-coded, %s device pages (chunks and metadata; %d codings measured without writing)",
		r.Recoded, thousands(o.DevicePagesWritten), r.Measured)
	if o.SavePages > 0 && o.DevicePagesWritten > 0 {
		fmt.Fprintf(w, ", what %.1f saves of this run write", o.SavesCost)
	}
	fmt.Fprintln(w)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/ckptfs/ckptfs/encode/analyze"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newAnalyzeCommand) }

func newAnalyzeCommand() *cobra.Command {
	var asJSON, tensors bool
	cmd := &cobra.Command{
		Use:   "analyze A B",
		Short: "Compare two checkpoints: the paper's Table 1 and per-tensor change statistics",
		Long: `analyze finds the float tensors in checkpoints A and B (same detectors as the
filesystem), pairs them by parameter name (a safetensors header's names, the
dict-key paths of a torch.save pickle: model.fc.weight, state.3.exp_avg) or,
where a file names none, by storage key (data/17), and prints the share of parameters whose first k
bits (sign, exponent, high mantissa) are equal for k = 4..12 (the delta snapshot
paper's Table 1), then, with --tensors, per-tensor statistics: identical share,
mean equal leading bits, mean relative change.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			an, err := analyze.Compare(args[0], args[1])
			if err != nil {
				return err
			}
			// Float tensors of each file: those compared plus those only in it.
			for _, f := range []struct {
				path, format string
				n            int
			}{{args[0], an.FormatA, len(an.Tensors) + an.OnlyInA}, {args[1], an.FormatB, len(an.Tensors) + an.OnlyInB}} {
				if f.n == 0 {
					return fmt.Errorf("no tensors found in %s (format %s): ckptfs stores it as raw bytes, and analyze has nothing to compare", f.path, f.format)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, an)
			}
			fmt.Fprintf(out, "%s (%s) vs %s (%s): %s elements in %d tensors compared (%d only in A, %d only in B)\n\n",
				args[0], an.FormatA, args[1], an.FormatB, thousands(an.Elements), len(an.Tensors), an.OnlyInA, an.OnlyInB)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "same heading bits\tshare of parameters\t")
			for i := len(an.SameHeadingBits) - 1; i >= 0; i-- {
				r := an.SameHeadingBits[i]
				fmt.Fprintf(tw, "%d\t%.2f%%\t\n", r.Bits, 100*r.Share)
			}
			tw.Flush()
			if tensors {
				fmt.Fprintln(out)
				tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TENSOR\tDTYPE\tELEMENTS\tIDENTICAL\tMEAN SAME BITS\tMEAN REL CHANGE\tMAX ABS CHANGE")
				for _, t := range sortedNaturally(an.Tensors, tensorLabel) {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f%%\t%.2f\t%.3g\t%.3g\n", tensorLabel(t), t.DType, thousands(t.Elements),
						100*t.Identical, t.MeanSameBits, t.MeanRelChange, t.MaxAbsChange)
				}
				tw.Flush()
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&tensors, "tensors", false, "also print one row per tensor")
	return cmd
}

// tensorLabel names a tensor by its parameter name where the file gives one,
// else by its storage key; --json has both.
func tensorLabel(t analyze.TensorChanges) string {
	if t.Name != "" {
		return t.Name
	}
	return t.Key
}

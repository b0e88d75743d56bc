package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ckptfs/ckptfs/chain"
)

// printReport writes a store report as tables a person can read: the
// device beside the shadow (what a plain filesystem would have written),
// then families and files.
func printReport(out io.Writer, r *chain.Report, files bool) {
	fmt.Fprintf(out, "codec %s, scheme %s, snap-dis %s\n\n", r.Codec, r.Scheme, r.SnapDis)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tckptfs\tplain fs (shadow)\tratio\t")
	d, s := r.Device, r.Shadow
	row := func(name string, a, b int64, ratio string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, thousands(a), thousands(b), ratio)
	}
	row("host pages written", d.HostPagesWritten, s.HostPagesWritten, fmt.Sprintf("%.3f", r.WrittenVolumeRatio))
	row("  of which metadata (estimate)", r.MetadataPagesEstimate, r.ShadowMetadataPagesEstimate, "")
	row("GC pages copied", d.GCPagesCopied, s.GCPagesCopied, "")
	row("pages programmed", d.PagesProgrammed, s.PagesProgrammed, ratioString(d.PagesProgrammed, s.PagesProgrammed))
	er := "-"
	if r.EraseRatio != nil {
		er = fmt.Sprintf("%.3f", *r.EraseRatio)
	}
	row("erases", d.Erases, s.Erases, er)
	fmt.Fprintf(tw, "WAF\t%.3f\t%.3f\t\t\n", d.WAF, s.WAF)
	fmt.Fprintf(tw, "erase count min/mean/max\t%d/%.2f/%d\t%d/%.2f/%d\t\t\n",
		d.EraseCountMin, d.EraseCountMean, d.EraseCountMax, s.EraseCountMin, s.EraseCountMean, s.EraseCountMax)
	fmt.Fprintf(tw, "simulated device time (ms)\t%.1f\t%.1f\t\t\n", d.ElapsedMs, s.ElapsedMs)
	if r.Lifetime.DeviceDays > 0 || r.Lifetime.ShadowDays > 0 {
		fmt.Fprintf(tw, "lifetime at this rate (days, P/E %d)\t%s\t%s\t\t\n", r.Lifetime.PELimit,
			days(r.Lifetime.DeviceDays), days(r.Lifetime.ShadowDays))
	}
	tw.Flush()
	fmt.Fprintf(out, "\nlogical bytes %s (saved), stored bytes %s (kept), live files %d (%s), versions kept %d, useful storage %s pages\n",
		thousands(r.LogicalBytes), thousands(r.StoredBytes), r.Files, thousands(r.LiveBytes), r.Versions, thousands(r.UsefulStoragePages))
	fmt.Fprintf(out, "saves streamed %d, through the fallback (staged, encoded at close) %d\n", r.StreamedFiles, r.FallbackFiles)
	if len(r.FamilyRows) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FAMILY\tSAVED\tKEPT\tLOGICAL (KEPT)\tSTORED\tSTORED/LOGICAL")
		for _, f := range r.FamilyRows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", f.Name, f.Versions, f.Kept, thousands(f.LogicalBytes),
				thousands(f.StoredBytes), ratioString(f.StoredBytes, f.LogicalBytes))
		}
		tw.Flush()
	}
	if files && len(r.FileRows) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSIZE\tSTORED\tDEPTH\tCODEC\tFORMAT\tINGEST\tREFERENCE (WHY)")
		for _, f := range r.FileRows {
			ref := "-"
			if f.Reference != 0 {
				ref = fmt.Sprintf("%s (%s)", orUnknown(f.RefPath), f.RefReason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", f.Path, thousands(f.Size), thousands(f.StoredBytes), f.Depth,
				f.Codec, f.Format, f.Ingest, ref)
		}
		tw.Flush()
	}
}

// orUnknown names a reference saved before versions kept their path.
func orUnknown(p string) string {
	if p == "" {
		return "?"
	}
	return p
}

func ratioString(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(a)/float64(b))
}

func days(d float64) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", d)
}

// thousands formats n with thin separators: 12,345,678.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

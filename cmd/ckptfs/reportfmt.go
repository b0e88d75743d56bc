package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

// policyLine is the report's policy: each setting the report shows, by
// its flag ("codec planes, scheme progressive, snap-dis auto").
func policyLine(r *chain.Summary) string {
	var parts []string
	for _, s := range policy.Settings() {
		if text, ok := r.PolicyText(s.Key); s.Reported && ok {
			parts = append(parts, s.Flag+" "+text)
		}
	}
	return strings.Join(parts, ", ")
}

// printReport writes a store report as tables a person can read: the
// device beside the shadow (what a plain filesystem would have written),
// then families and files.
func printReport(out io.Writer, r *storedir.Report, files bool) {
	fmt.Fprintln(out, headline(r))
	fmt.Fprint(out, policyLine(&r.Summary))
	if r.SaveMode != "" {
		fmt.Fprintf(out, "; saves: %s staging files", r.SaveMode)
	}
	if c := r.Capacity; c.UsableBytes > 0 {
		fmt.Fprintf(out, "\ncapacity: %s, %s free (%s of simulated flash), %s", medium.HumanBytes(c.UsableBytes), medium.HumanBytes(c.FreeBytes),
			medium.HumanBytes(c.FlashBytes), c.Source)
	}
	if n := r.ReadCopies; n > 0 {
		fmt.Fprintf(out, "\n%d read copies (%s) rebuilt for readers, read through passthrough", n, medium.HumanBytes(r.ReadCopyBytes))
	}
	if n := r.SavesWaitingForRoom; n > 0 {
		fmt.Fprintf(out, "\n%d saves wait in their staging files for room on the store's host filesystem (its log says which)", n)
	}
	if n := r.CommitsFailed; n > 0 {
		fmt.Fprintf(out, "\n%d commits of closed files failed since the mount; %d saves wait in their staging files to be tried again (the log says why)", n, r.SavesRetrying)
	}
	fmt.Fprint(out, "\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tckptfs\tplain fs (shadow)\tratio\t")
	d, s := r.Device, r.Shadow
	row := func(name string, a, b int64, ratio string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, thousands(a), thousands(b), ratio)
	}
	row("host pages written", d.HostPagesWritten, s.HostPagesWritten, fmt.Sprintf("%.3f", r.WrittenVolumeRatio))
	row("  of which metadata (estimate)", r.MetadataPagesEstimate, r.ShadowMetadataPagesEstimate, "")
	if r.StagedPages > 0 {
		row("  of which staging files written back", r.StagedPages, 0, "")
	}
	if r.ShadowDirtyPages > 0 || r.ShadowSparedPages > 0 || r.DeviceDirtyPages > 0 || r.DeviceSparedPages > 0 {
		row("still dirty in the page cache", r.DeviceDirtyPages, r.ShadowDirtyPages, "")
		row("spared by the page cache", r.DeviceSparedPages, r.ShadowSparedPages, "")
	}
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
	if r.LossyFiles > 0 {
		fmt.Fprintf(out, "LOSSY: %d files hold tensors an archive tier rounded (mount --tier, repack --lossy); --files names them, each file's user.ckptfs.fidelity says so\n", r.LossyFiles)
	}
	if rt := r.Runtime; rt != nil {
		fmt.Fprintf(out, "daemon: %.1f CPU-seconds, %.1f%% of it in the Go runtime's memory management; chunks decoded from the device %d, served from the reference tier %d\n",
			rt.CPUSeconds, 100*rt.GCShare, r.ChunksRebuilt, r.TierHits)
	}
	if len(r.FamilyRows) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FAMILY\tSAVED\tKEPT\tLOGICAL (KEPT)\tSTORED\tSTORED/LOGICAL")
		for _, f := range sortedNaturally(r.FamilyRows, func(f chain.FamilyRow) string { return f.Name }) {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", f.Name, f.Versions, f.Kept, thousands(f.LogicalBytes),
				thousands(f.StoredBytes), ratioString(f.StoredBytes, f.LogicalBytes))
		}
		tw.Flush()
	}
	if files && len(r.FileRows) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSIZE\tSTORED\tDEPTH\tCODEC\tFORMAT\tFIDELITY\tINGEST\tREFERENCE (WHY)")
		for _, f := range sortedNaturally(r.FileRows, func(f chain.FileRow) string { return f.Path }) {
			ref := "-"
			if f.Reference != 0 {
				ref = fmt.Sprintf("%s (%s)", orUnknown(f.RefPath), f.RefReason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Path, thousands(f.Size), thousands(f.StoredBytes), f.Depth,
				f.Codec, f.Format, f.Fidelity, f.Ingest, ref)
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

// days formats a lifetime: whole days, two significant digits under ten
// (a store written for minutes projects less than a day).
func days(d float64) string {
	switch {
	case d <= 0:
		return "-"
	case d < 10:
		return strconv.FormatFloat(d, 'g', 2, 64)
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

// headline is the report in one line: how much less ckptfs wrote than a
// plain filesystem would have, and what that did to erases and lifetime.
// lessOrMore says a ratio to a plain filesystem's writes as "12.5% less"
// or "2.5% more".
func lessOrMore(ratio float64) string {
	if ratio <= 1 {
		return fmt.Sprintf("%.1f%% less", 100*(1-ratio))
	}
	return fmt.Sprintf("%.1f%% more", 100*(ratio-1))
}

func headline(r *storedir.Report) string {
	d, s := r.Device, r.Shadow
	if s.HostPagesWritten+r.ShadowDirtyPages == 0 {
		return "nothing written yet"
	}
	written := fmt.Sprintf("(%s against %s pages)", thousands(d.HostPagesWritten+r.DeviceDirtyPages), thousands(s.HostPagesWritten+r.ShadowDirtyPages))
	var line string
	if r.ShadowSparedPages > 0 || r.DeviceSparedPages > 0 {
		// Saves seconds apart: the page caches never wrote what was
		// replaced within the dirty expiry. A training saving minutes
		// apart writes every save, so that figure leads.
		every := func(pages, spared int64) string { return thousands(pages + spared) }
		line = fmt.Sprintf("with every save written, as a training saving minutes apart writes them, %s than a plain filesystem (%s against %s pages)",
			lessOrMore(r.WrittenVolumeRatioEveryCommit), every(d.HostPagesWritten+r.DeviceDirtyPages, r.DeviceSparedPages),
			every(s.HostPagesWritten+r.ShadowDirtyPages, r.ShadowSparedPages))
		line += fmt.Sprintf("; these saves, seconds apart, wrote %s %s: the page cache spared ckptfs %s pages and the plain filesystem %s, replaced within the dirty expiry",
			lessOrMore(r.WrittenVolumeRatio), written, thousands(r.DeviceSparedPages), thousands(r.ShadowSparedPages))
	} else {
		line = fmt.Sprintf("wrote %s than a plain filesystem %s", lessOrMore(r.WrittenVolumeRatio), written)
	}
	switch {
	case r.EraseRatio == nil && d.Erases == 0 && r.DeviceDirtyPages+r.ShadowDirtyPages > 0:
		// A preconditioned device erases too, but only once the pages
		// are programmed.
		line += fmt.Sprintf("; no erases yet on either device (%s of their pages are still in the page caches: they are programmed at the dirty expiry, fsync or unmount; a fresh device erases only once full: --precondition)",
			thousands(r.DeviceDirtyPages+r.ShadowDirtyPages))
	case r.EraseRatio == nil && d.Erases == 0:
		line += "; no erases yet on either device (GC has not run: a fresh device; mount with --precondition to see wear)"
	case r.EraseRatio == nil:
		line += fmt.Sprintf("; erases %s, plain filesystem none", thousands(d.Erases))
	default:
		er := *r.EraseRatio
		if er <= 1 {
			line += fmt.Sprintf("; erases %.1f%% fewer (%s against %s)", 100*(1-er), thousands(d.Erases), thousands(s.Erases))
		} else {
			line += fmt.Sprintf("; erases %.1f%% more (%s against %s)", 100*(er-1), thousands(d.Erases), thousands(s.Erases))
		}
	}
	if r.Lifetime.DeviceDays > 0 && r.Lifetime.ShadowDays > 0 {
		line += fmt.Sprintf("; device lifetime %s days against %s", days(r.Lifetime.DeviceDays), days(r.Lifetime.ShadowDays))
	}
	return line
}

// sortedNaturally returns rows ordered by name with runs of digits
// compared as numbers: checkpoint-896 before checkpoint-1280.
func sortedNaturally[T any](rows []T, name func(T) string) []T {
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b T) int { return naturalCompare(name(a), name(b)) })
	return out
}

// naturalCompare orders strings with runs of ASCII digits compared by
// value (then by length, so 007 after 7), everything else bytewise.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if c := cmp.Compare(da, db); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

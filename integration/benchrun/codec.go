package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// runCodecSection reuses the encode package's measurements: the ratio and
// one-core throughput table (TestReportRatios, thread CPU time) and the
// Pipeline benchmark (wall clock, 1 and 2 workers), five samples each.
func runCodecSection(b *bench) error {
	env := []string{"CKPTFS_REPORT=1", "CKPTFS_SERIES=" + b.series}
	args := []string{"test", "-count=1", "-run", "TestReportRatios", "-v", "./encode/"}
	sec := &CodecSection{ReportCommand: "CKPTFS_REPORT=1 go " + b.display(args...)}
	out, err := b.output(env, "go", args...)
	if err != nil {
		return err
	}
	if sec.Rows, err = parseCodecReport(string(out)); err != nil {
		return fmt.Errorf("%s: %w", sec.ReportCommand, err)
	}
	args = []string{"test", "-count=5", "-run", "^$", "-bench", "Pipeline", "./encode/"}
	sec.PipelineCommand = "go " + b.display(args...)
	out, err = b.output([]string{"CKPTFS_SERIES=" + b.series}, "go", args...)
	if err != nil {
		return err
	}
	if sec.Pipeline, err = parsePipeline(string(out)); err != nil {
		return fmt.Errorf("%s: %w", sec.PipelineCommand, err)
	}
	b.res.Codec = sec
	return nil
}

// parseCodecReport reads TestReportRatios' table: codec, data, kind, ratio,
// enc MB/s, dec MB/s, and (except for dynrle) the size against dynrle.
func parseCodecReport(out string) ([]CodecRow, error) {
	var rows []CodecRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || (f[2] != "delta" && f[2] != "base") {
			continue
		}
		var nums [3]float64
		ok := true
		for i := range nums {
			v, err := strconv.ParseFloat(f[3+i], 64)
			ok = ok && err == nil
			nums[i] = v
		}
		if !ok {
			continue
		}
		r := CodecRow{Codec: f[0], Data: f[1], Kind: f[2], Ratio: nums[0], EncMBs: nums[1], DecMBs: nums[2]}
		if len(f) > 6 {
			r.VsDynRLE = f[6]
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no codec rows in the output (is the series there?)")
	}
	return rows, nil
}

var pipelineLine = regexp.MustCompile(`^BenchmarkPipeline/(enc|dec)/workers=(\d+)(?:-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) MB/s`)

// parsePipeline reads BenchmarkPipeline's lines, one per sample.
func parsePipeline(out string) ([]PipelineRow, error) {
	byKey := map[string]*PipelineRow{}
	for _, line := range strings.Split(out, "\n") {
		m := pipelineLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		w, _ := strconv.Atoi(m[2])
		v, _ := strconv.ParseFloat(m[3], 64)
		k := m[1] + "/" + m[2]
		if byKey[k] == nil {
			byKey[k] = &PipelineRow{Op: m[1], Workers: w}
		}
		byKey[k].Samples = append(byKey[k].Samples, v)
	}
	if len(byKey) == 0 {
		return nil, fmt.Errorf("no BenchmarkPipeline lines in the output (is the series there?)")
	}
	var rows []PipelineRow
	for _, r := range byKey {
		r.MedianMBs = median(r.Samples)
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Op != rows[j].Op {
			return rows[i].Op == "enc"
		}
		return rows[i].Workers < rows[j].Workers
	})
	return rows, nil
}

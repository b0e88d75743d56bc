package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

const reportOutput = `=== RUN   TestReportRatios
    report_test.go:65: 
        codec     data       kind    ratio  enc MB/s  dec MB/s  vs dynrle  dynrle/x
        dynrle    adam/fp32  delta  0.8123       358       419                     
        planes    adam/fp32  delta  0.6901       426      1005     -15.0%     1.18x
        planes    bf16/bf16  base   0.6518       721      1261      +0.0%     1.00x
        
--- PASS: TestReportRatios (88.50s)
`

func TestParseCodecReport(t *testing.T) {
	rows, err := parseCodecReport(reportOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := []CodecRow{
		{Codec: "dynrle", Data: "adam/fp32", Kind: "delta", Ratio: 0.8123, EncMBs: 358, DecMBs: 419},
		{Codec: "planes", Data: "adam/fp32", Kind: "delta", Ratio: 0.6901, EncMBs: 426, DecMBs: 1005, VsDynRLE: "-15.0%"},
		{Codec: "planes", Data: "bf16/bf16", Kind: "base", Ratio: 0.6518, EncMBs: 721, DecMBs: 1261, VsDynRLE: "+0.0%"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	if _, err := parseCodecReport("--- SKIP: TestReportRatios\nok\n"); err == nil {
		t.Error("output without rows parsed")
	}
}

func TestParsePipeline(t *testing.T) {
	out := `goos: linux
BenchmarkPipeline/enc/workers=1-2         	       2	 505200824 ns/op	 141.53 MB/s
BenchmarkPipeline/dec/workers=2-2         	       7	 152451340 ns/op	 469.00 MB/s
BenchmarkPipeline/enc/workers=1-2         	       2	 505200824 ns/op	 150.00 MB/s
BenchmarkPipeline/enc/workers=1-2         	       2	 505200824 ns/op	 100.00 MB/s
BenchmarkPipeline/enc/workers=2-2         	       4	 297027013 ns/op	 240.72 MB/s
PASS`
	rows, err := parsePipeline(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	first := rows[0]
	if first.Op != "enc" || first.Workers != 1 || len(first.Samples) != 3 || first.MedianMBs != 141.53 {
		t.Errorf("first row %+v, want enc, 1 worker, 3 samples, median 141.53", first)
	}
	if rows[1].Op != "enc" || rows[1].Workers != 2 || rows[2].Op != "dec" {
		t.Errorf("rows out of order: %+v", rows)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The synthetic checkpoints must be valid .npy files whose versions drift
// by at most synthDrift relative, and be the same whichever way they are made.
func TestSynth(t *testing.T) {
	const size = 1 << 20
	v0, v1 := synthBytes(size, 3, 0), synthBytes(size, 3, 1)
	hlen := 10 + int(binary.LittleEndian.Uint16(v0[8:10]))
	if !bytes.HasPrefix(v0, []byte("\x93NUMPY\x01\x00")) || hlen%64 != 0 || v0[hlen-1] != '\n' {
		t.Fatalf("bad .npy header %q", v0[:hlen])
	}
	n := (len(v0) - hlen) / 4
	if !strings.Contains(string(v0[:hlen]), "'shape': (") || int64(n) != (size-128)/4 {
		t.Fatalf("header %q for %d values", v0[:hlen], n)
	}
	changed := 0
	for i := 0; i < n; i++ {
		a := math.Float32frombits(binary.LittleEndian.Uint32(v0[hlen+4*i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(v1[hlen+4*i:]))
		if math.IsNaN(float64(a)) || math.Abs(float64(a)) > 0.05 {
			t.Fatalf("value %d = %v, outside the weights' range", i, a)
		}
		if a != b {
			changed++
		}
		if d := math.Abs(float64(b - a)); d > 2.01*synthDrift*math.Abs(float64(a))+1e-12 {
			t.Fatalf("value %d moved from %v to %v", i, a, b)
		}
	}
	if changed < n/2 {
		t.Errorf("only %d of %d values changed between versions", changed, n)
	}
	var streamed bytes.Buffer
	if err := writeSynth(&streamed, size, 3, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(streamed.Bytes(), v1) {
		t.Error("writeSynth and synthBytes disagree")
	}
}

// TestSave1GDoc renders section 10 and the headline from a result: every
// target's row and the goal line, no missing key.
func TestSave1GDoc(t *testing.T) {
	tg := func(save float64) *Save1GTarget {
		return &Save1GTarget{Save: []float64{save}, Durable: []float64{2 * save}, SaveMed: save, DurableMed: 2 * save, SaveRatio: save, DurableRatio: save}
	}
	s := &Save1G{Command: "python bench_save1g.py", CheckpointBytes: 1 << 30, PauseSeconds: 6,
		Targets:    map[string]*Save1GTarget{"passthrough": tg(1.07), "daemon-written": tg(1.3), "loopback-passthrough": tg(0.98), "plain": tg(1)},
		StoreRatio: map[string]float64{"passthrough": 0.7, "daemon-written": 0.71}, DaemonHWM: map[string]int64{}}
	doc, err := renderDoc(&Results{Save1G: s})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 10. torch.save of 1 GiB", "| passthrough | 1.07 |", "| daemon-written | 1.30 |",
		"| loopback-passthrough | 0.98 |", "**1.07×** with passthrough", "torch.save of 1024 MiB"} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "Each save right after") {
		t.Error("a table for the no-pause run that did not happen")
	}
}

// committedResults reads docs/benchmarks.json.
func committedResults(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../docs/benchmarks.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRenderCommittedDoc: docs/BENCHMARKS.md is what the template makes of
// docs/benchmarks.json, byte for byte, so that neither drifts from the
// other. After editing BENCHMARKS.md.tmpl: go run ./integration/benchrun render docs
func TestRenderCommittedDoc(t *testing.T) {
	var r Results
	if err := json.Unmarshal(committedResults(t), &r); err != nil {
		t.Fatal(err)
	}
	got, err := renderDoc(&r)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.SplitAfter(got, "\n"), strings.SplitAfter(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("docs/BENCHMARKS.md differs from the render of docs/benchmarks.json (run `go run ./integration/benchrun render docs`); line %d:\nrendered:  %q\ncommitted: %q", i+1, gl, wl)
		}
	}
}

// A template that names a field or a map key the results lack fails the
// render instead of writing "<no value>" into the document.
func TestDocTemplateErrors(t *testing.T) {
	r := &Results{Commit: "abc", TorchIO: &TorchIO{Ops: map[string]*ABTimes{"save": {Ratio: 1}}}}
	for _, text := range []string{
		`{{define "BENCHMARKS.md"}}commit {{.Commit}}, {{.NoSuchField}}{{end}}`,
		`{{define "BENCHMARKS.md"}}{{f2 .TorchIO.Ops.save.Ratio}} {{f2 .TorchIO.Ops.no_such_op.Ratio}}{{end}}`,
		`{{define "BENCHMARKS.md"}}{{.TorchIO.Ops.no_such_op}}{{end}}`,
		`{{define "BENCHMARKS.md"}}{{.Codec.Rows}}{{end}}`, // a section absent from the results
		`{{define "BENCHMARKS.md"}}{{perGiB .Scale.Sizes "no_such_figure"}}{{end}}`,
	} {
		tm, err := newDocTemplate(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if doc, err := executeDoc(tm, r); err == nil {
			t.Errorf("%s rendered %q, want an error", text, doc)
		}
	}
	if _, err := newDocTemplate(`{{define "BENCHMARKS.md"}}{{noSuchFunc 1}}{{end}}`); err == nil {
		t.Error("a template calling an unknown function parsed")
	}
	// The real template, on a section that lacks a figure it must show.
	var full Results
	if err := json.Unmarshal(committedResults(t), &full); err != nil {
		t.Fatal(err)
	}
	delete(full.Save1G.Targets, "daemon-written")
	delete(full.TorchIO.Ops, "load")
	if doc, err := renderDoc(&full); err == nil {
		t.Errorf("results without save_1g's daemon-written and torch_io's load rendered:\n%s", doc)
	}
}

// TestRenderPartial renders results with only some sections, as a run with
// --only leaves them when no earlier benchmarks.json had the others: the
// sections present are shown, the absent ones leave no heading, headline
// or prose behind.
func TestRenderPartial(t *testing.T) {
	// Each section's heading and its headline bullet.
	marks := map[string][]string{
		"replay":        {"## 1. Write volume", "## 2. Useful storage", "- **Write volume**", "- **Erases**"},
		"codec":         {"## 3. Codec throughput", "- **Codec**"},
		"torch_io":      {"## 4. Mount throughput", "A real training (a bag-of-words", "- **Mount**"},
		"sequential_io": {"## 4. Mount throughput", "**Sequential I/O.**", "- **Sequential I/O**"},
		"training":      {"## 5. Training slowdown", "- **Training slowdown**"},
		"scale":         {"## 6. Scale", "- **Scale**"},
		"peers":         {"## 7. Side by side", "- **Against ZipNN and zstd**"},
		"reads":         {"## 8. Reads", "- **Cold reads**"},
		"save_stall":    {"## 9. Saves that do not stall", "- **Saves that do not stall**"},
		"save_1g":       {"## 10. torch.save of 1 GiB", "- **torch.save of"},
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(committedResults(t), &all); err != nil {
		t.Fatal(err)
	}
	for _, keep := range [][]string{{"codec", "save_1g"}, {"sequential_io", "reads"}, {"save_stall"}, {"torch_io", "save_stall"}, {}} {
		part := map[string]json.RawMessage{}
		for k, v := range all {
			if _, section := marks[k]; !section {
				part[k] = v
			}
		}
		for _, k := range keep {
			part[k] = all[k]
		}
		part["full_run"] = json.RawMessage("false")
		b, err := json.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		doc, err := renderDoc(&r)
		if err != nil {
			t.Errorf("%v: %v", keep, err)
			continue
		}
		want := []string{"# Benchmarks", "## Headline figures", "This file was last written by a partial run (`--only`)"}
		for _, k := range keep {
			want = append(want, marks[k]...)
		}
		for _, w := range want {
			if !strings.Contains(doc, w) {
				t.Errorf("%v: doc lacks %q", keep, w)
			}
		}
		for k, ms := range marks {
			for _, m := range ms {
				if !strings.Contains(strings.Join(want, "\n"), m) && strings.Contains(doc, m) {
					t.Errorf("%v: doc has %q of the absent section %s", keep, m, k)
				}
			}
		}
		if strings.Contains(doc, "<no value>") {
			t.Errorf("%v: doc has <no value>", keep)
		}
		if strings.Contains(doc, "## 4.") != (strings.Contains(doc, "**Sequential I/O.**") || strings.Contains(doc, "A real training (a bag")) {
			t.Errorf("%v: section 4's heading without its figures, or the reverse", keep)
		}
	}
	// Nothing measured at all: the frame of the document, no section.
	doc, err := renderDoc(&Results{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc, "## 1") || !strings.HasSuffix(doc, "## Headline figures\n\n\n") {
		t.Errorf("empty results rendered:\n%s", doc)
	}
}

// The reference tier the document states is the one a section recorded;
// results recorded before sections did get the default of their time,
// from the measured machine's memory.
func TestRefTierMiB(t *testing.T) {
	if got := refTierMiB(24<<30, mountRefTierMiB()); got != 48 {
		t.Errorf("recorded default tier: %d MiB, want 48", got)
	}
	for _, c := range []struct{ mem, tier int64 }{{1 << 30, 112}, {24 << 30, 2688}, {1 << 40, 7168}} {
		if got := refTierMiB(c.mem, 0); got != c.tier {
			t.Errorf("refTierMiB(%d GiB, unrecorded) = %d MiB, want %d", c.mem>>30, got, c.tier)
		}
	}
}

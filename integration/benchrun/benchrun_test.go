package main

import (
	"bytes"
	"encoding/binary"
	"math"
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
	doc := renderDoc(&Results{Save1G: s})
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

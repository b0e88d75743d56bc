package main

import (
	"strconv"
	"testing"

	"gonum.org/v1/plot"
)

// TestCountTicksAreIntegers: a count axis (erases, blocks, deltas) labels
// whole numbers only, within the range, a few of them, ascending.
func TestCountTicksAreIntegers(t *testing.T) {
	for _, r := range [][2]float64{
		{0, 1}, {0, 1.3}, {0, 2.5}, {0, 3}, {0, 3.4}, {0, 7.2}, {0, 12.5}, {0, 61}, {0, 774.4},
		{3, 17}, {0.5, 4.5}, {-2, 2}, {0, 1e6}, {0, 2.7e9},
	} {
		var labels []int64
		for _, tk := range (countTicks{}).Ticks(r[0], r[1]) {
			if tk.Value < r[0] || tk.Value > r[1] {
				t.Errorf("range %v: tick at %v lies outside", r, tk.Value)
			}
			if tk.Label == "" {
				continue
			}
			n, err := strconv.ParseInt(tk.Label, 10, 64)
			if err != nil || float64(n) != tk.Value {
				t.Errorf("range %v: tick %v labelled %q, want a whole number naming it", r, tk.Value, tk.Label)
			}
			if len(labels) > 0 && n <= labels[len(labels)-1] {
				t.Errorf("range %v: labels %v then %d", r, labels, n)
			}
			labels = append(labels, n)
		}
		if len(labels) < 2 || len(labels) > 6 {
			t.Errorf("range %v: labels %v, want 2 to 6", r, labels)
		}
	}
	// A range holding no whole number has no ticks, rather than fractions.
	for _, tk := range (countTicks{}).Ticks(0.2, 0.8) {
		t.Errorf("range 0.2..0.8: tick %+v", tk)
	}
}

// TestLegendOffTheData: the legend takes a corner no series covers, and
// where the series cover all four the y axis rises to clear a top one.
func TestLegendOffTheData(t *testing.T) {
	flat := func(n int, v float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	rising := make([]float64, 12)
	for i := range rising {
		rising[i] = float64(i)
	}
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	for _, c := range []struct {
		name     string
		bars     bool
		rows     []series
		top, lft bool
	}{
		{"high lines", false, []series{{"a", flat(12, 8), nil}, {"b", flat(12, 7.5), nil}}, false, false},
		{"rising lines", false, []series{{"a", rising, nil}}, true, true},
		{"even bars", true, []series{{"ckptfs", flat(9, 700), nil}, {"plain fs", flat(9, 880), nil}}, true, false},
	} {
		p := newPlot(c.name, "x", "y")
		var err error
		if c.bars {
			err = addBars(p, names[:len(c.rows[0].Values)], c.rows)
		} else {
			err = addLines(p, names[:len(c.rows[0].Values)], c.rows)
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Legend.Top != c.top || p.Legend.Left != c.lft {
			t.Errorf("%s: legend top=%v left=%v, want top=%v left=%v", c.name, p.Legend.Top, p.Legend.Left, c.top, c.lft)
		}
		covered := barAreas(c.rows)
		if !c.bars {
			covered = lineAreas(c.rows, 0, 0)
		}
		if a, ok := legendOverlap(p, covered); ok {
			t.Errorf("%s: the legend covers %+v (y axis %v..%v)", c.name, a, p.Y.Min, p.Y.Max)
		}
	}
}

// legendOverlap returns a covered area the legend's box overlaps.
func legendOverlap(p *plot.Plot, covered []area) (area, bool) {
	b := legendBox(p, p.Legend.Top, p.Legend.Left)
	for _, a := range covered {
		if a.overlaps(b) {
			return a, true
		}
	}
	return area{}, false
}

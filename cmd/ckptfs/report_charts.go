package main

import (
	"fmt"
	"image/color"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ckptfs/ckptfs/nandsim"
)

// Chart size: wide enough for nine methods' bars side by side.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 4.8 * vg.Inch
)

// plainColor draws the shadow device (what a plain filesystem writes) in
// every chart, so it reads the same everywhere.
var plainColor = color.RGBA{R: 150, G: 150, B: 150, A: 255}

// chart is one figure of the page; Plot is nil when the input lacks what it
// needs, and Missing says what.
type chart struct {
	File, Title, Caption string
	Plot                 *plot.Plot
	Missing              string
}

// series is one named row of values, drawn as bars or a line.
type series struct {
	Name   string
	Values []float64
	Color  color.Color
}

// buildCharts draws every chart the input allows, in page order.
func buildCharts(d *reportData) ([]chart, error) {
	var charts []chart
	add := func(c chart, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.File, err)
		}
		charts = append(charts, c)
		return nil
	}
	if d.Kind == "compare" {
		if err := add(methodsChart(d, "methods_written.png", false)); err != nil {
			return nil, err
		}
		if err := add(methodsChart(d, "methods_erases.png", true)); err != nil {
			return nil, err
		}
	}
	if d.Kind == "store" {
		if err := add(storedVsLogicalChart(d)); err != nil {
			return nil, err
		}
	} else {
		if err := add(bytesWrittenChart(d)); err != nil {
			return nil, err
		}
		if err := add(cumulativeErasesChart(d)); err != nil {
			return nil, err
		}
	}
	if err := add(eraseHistogramChart(d)); err != nil {
		return nil, err
	}
	if err := add(chainDepthChart(d)); err != nil {
		return nil, err
	}
	return charts, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// countAxis marks the y axis of p as counting things: whole-number ticks.
func countAxis(p *plot.Plot) *plot.Plot {
	p.Y.Tick.Marker = countTicks{}
	return p
}

// addBars draws groups of bars, one bar per series in each category.
func addBars(p *plot.Plot, labels []string, rows []series) error {
	// Bars fill 80% of a category's share of the plot width.
	w := chartWidth * 0.8 * 0.8 / vg.Length(len(labels)*len(rows))
	w = min(w, vg.Points(40))
	for i, r := range rows {
		b, err := plotter.NewBarChart(plotter.Values(r.Values), w)
		if err != nil {
			return err
		}
		b.Color = r.Color
		b.LineStyle.Width = 0
		b.Offset = w * (vg.Length(i) - vg.Length(len(rows)-1)/2)
		p.Add(b)
		p.Legend.Add(r.Name, b)
	}
	p.NominalX(thinLabels(labels, 16)...)
	// Half a category of margin each side keeps the outer bars whole.
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	if len(labels) > 8 || maxLen(labels) > 10 {
		p.X.Tick.Label.Rotation = math.Pi / 5
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	p.Y.Min = 0
	placeLegend(p, barAreas(rows))
	return nil
}

// addLines draws one line with points per series over categories.
func addLines(p *plot.Plot, labels []string, rows []series) error {
	for i, r := range rows {
		xys := make(plotter.XYs, len(r.Values))
		for k, v := range r.Values {
			xys[k] = plotter.XY{X: float64(k), Y: v}
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = r.Color, r.Color
		l.Dashes = plotutil.Dashes(i / 7)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(r.Name, l, s)
	}
	p.NominalX(labels...)
	p.Y.Min = 0
	// A marker's reach, about 5 points, in data units.
	dx := max(p.X.Max-p.X.Min, 1) * 5 / float64(chartWidth-vg.Points(70))
	dy := max(p.Y.Max-p.Y.Min, 1) * 5 / float64(chartHeight-vg.Points(70))
	placeLegend(p, lineAreas(rows, dx, dy))
	return nil
}

// thinLabels blanks all but about max evenly spaced labels, so that many
// categories stay legible.
func thinLabels(labels []string, max int) []string {
	if len(labels) <= max {
		return labels
	}
	every := (len(labels) + max - 1) / max
	out := make([]string, len(labels))
	for i := 0; i < len(labels); i += every {
		out[i] = labels[i]
	}
	return out
}

func maxLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n = max(n, len(s))
	}
	return n
}

// checkpointLabels names each step by the last number in its path (the
// training step of ckpt-000128.pt), or its position when it has none.
func checkpointLabels(m *reportMethod) []string {
	labels := make([]string, len(m.Steps))
	for i, s := range m.Steps {
		nums := digitRuns.FindAllString(s.Path, -1)
		if len(nums) == 0 {
			labels[i] = fmt.Sprint(i + 1)
			continue
		}
		n := strings.TrimLeft(nums[len(nums)-1], "0")
		if n == "" {
			n = "0"
		}
		labels[i] = n
	}
	return labels
}

var digitRuns = regexp.MustCompile(`[0-9]+`)

func methodColor(i int) color.Color { return plotutil.Color(i) }

const mib = 1 << 20

func bytesWrittenChart(d *reportData) (chart, error) {
	c := chart{File: "bytes_written.png", Title: "Bytes written per checkpoint",
		Caption: "Host pages each save wrote to the simulated SSD, times the page size, beside what a plain filesystem wrote for the same save (the shadow device)."}
	first := &d.Methods[0]
	p := newPlot(c.Title, "checkpoint", "MiB written")
	labels := checkpointLabels(first)
	pageMiB := func(m *reportMethod, pages func(reportStep) int64) []float64 {
		v := make([]float64, len(m.Steps))
		for i, s := range m.Steps {
			v[i] = float64(pages(s)) * float64(m.Report.Device.PageSize) / mib
		}
		return v
	}
	dev := func(s reportStep) int64 { return s.DevicePagesWritten }
	plain := series{"plain fs", pageMiB(first, func(s reportStep) int64 { return s.ShadowPagesWritten }), plainColor}
	if len(d.Methods) == 1 {
		rows := []series{{"ckptfs (" + first.Name + ")", pageMiB(first, dev), methodColor(0)}, plain}
		c.Plot = p
		return c, addBars(p, labels, rows)
	}
	var rows []series
	for i := range d.Methods {
		rows = append(rows, series{d.Methods[i].Name, pageMiB(&d.Methods[i], dev), methodColor(i)})
	}
	rows = append(rows, plain)
	c.Plot = p
	return c, addLines(p, labels, rows)
}

func cumulativeErasesChart(d *reportData) (chart, error) {
	c := chart{File: "cumulative_erases.png", Title: "Erases so far, per checkpoint",
		Caption: "Block erases of the simulated SSD after each save, ckptfs beside the plain filesystem's shadow device."}
	for _, m := range d.Methods {
		for _, s := range m.Steps {
			if s.DeviceErases == nil || s.ShadowErases == nil {
				c.Missing = "the replay steps carry no device_erases/shadow_erases (ckptfs replay records only the totals); the totals are in the table above"
				return c, nil
			}
		}
	}
	p := countAxis(newPlot(c.Title, "checkpoint", "erases (cumulative)"))
	var rows []series
	for i, m := range d.Methods {
		v := make([]float64, len(m.Steps))
		for k, s := range m.Steps {
			v[k] = float64(*s.DeviceErases)
		}
		rows = append(rows, series{m.Name, v, methodColor(i)})
	}
	plain := make([]float64, len(d.Methods[0].Steps))
	for k, s := range d.Methods[0].Steps {
		plain[k] = float64(*s.ShadowErases)
	}
	rows = append(rows, series{"plain fs", plain, plainColor})
	if len(d.Methods) == 1 {
		rows[0].Name = "ckptfs (" + rows[0].Name + ")"
	}
	c.Plot = p
	return c, addLines(p, checkpointLabels(&d.Methods[0]), rows)
}

func eraseHistogramChart(d *reportData) (chart, error) {
	m := d.selected()
	c := chart{File: "erase_histogram.png", Title: "Erase counts across blocks (" + m.Name + ")",
		Caption: "How many blocks were erased how many times, ckptfs beside the plain filesystem; blocks never erased are counted in the title, not drawn."}
	type key struct{ lo, hi int64 }
	counts := map[key][2]float64{}
	var keys []key
	never := [2]int64{}
	for side, bins := range [2][]nandsim.EraseBin{m.Report.Device.EraseHistogram, m.Report.Shadow.EraseHistogram} {
		for _, b := range bins {
			if b.Hi == 0 {
				never[side] += b.Blocks
				continue
			}
			k := key{b.Lo, b.Hi}
			v, seen := counts[k]
			if !seen {
				keys = append(keys, k)
			}
			v[side] += float64(b.Blocks)
			counts[k] = v
		}
	}
	if len(keys) == 0 {
		c.Missing = "no block was erased on either device (a fresh device has free blocks to spare: replay with --precondition paper)"
		return c, nil
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].lo < keys[j].lo || (keys[i].lo == keys[j].lo && keys[i].hi < keys[j].hi)
	})
	labels := make([]string, len(keys))
	rows := []series{{"ckptfs", nil, methodColor(0)}, {"plain fs", nil, plainColor}}
	for i, k := range keys {
		labels[i] = fmt.Sprint(k.lo)
		if k.hi != k.lo {
			labels[i] = fmt.Sprintf("%d-%d", k.lo, k.hi)
		}
		rows[0].Values = append(rows[0].Values, counts[k][0])
		rows[1].Values = append(rows[1].Values, counts[k][1])
	}
	p := countAxis(newPlot(fmt.Sprintf("%s; never erased: %d ckptfs, %d plain", c.Title, never[0], never[1]), "times erased", "blocks"))
	c.Plot = p
	return c, addBars(p, labels, rows)
}

func chainDepthChart(d *reportData) (chart, error) {
	c := chart{File: "chain_depth.png", Title: "Chain depth",
		Caption: "Deltas between each checkpoint and its baseline: what a read must apply (0 = stored whole)."}
	if d.Kind == "store" {
		rep := &d.Methods[0].Report
		if len(rep.FileRows) == 0 {
			c.Missing = "the store holds no files"
			return c, nil
		}
		labels, v := make([]string, len(rep.FileRows)), make([]float64, len(rep.FileRows))
		for i, f := range rep.FileRows {
			labels[i], v[i] = shortPath(f.Path), float64(f.Depth)
		}
		p := countAxis(newPlot(c.Title+" per live file", "file", "chain depth"))
		c.Plot = p
		return c, addBars(p, labels, []series{{"ckptfs", v, methodColor(0)}})
	}
	p := countAxis(newPlot(c.Title+" per checkpoint", "checkpoint", "chain depth"))
	// Methods share a few depth patterns (all baselines, progressive,
	// chain); one line per pattern, named for its methods, keeps each visible.
	var rows []series
	for i, m := range d.Methods {
		v := make([]float64, len(m.Steps))
		for k, s := range m.Steps {
			v[k] = float64(s.Depth)
		}
		if j := findSeries(rows, v); j >= 0 {
			rows[j].Name += ", " + m.Name
			continue
		}
		rows = append(rows, series{m.Name, v, methodColor(i)})
	}
	c.Plot = p
	labels := checkpointLabels(&d.Methods[0])
	if len(rows) == 1 {
		return c, addBars(p, labels, rows)
	}
	return c, addLines(p, labels, rows)
}

func findSeries(rows []series, v []float64) int {
	for i, r := range rows {
		if slices.Equal(r.Values, v) {
			return i
		}
	}
	return -1
}

func methodsChart(d *reportData, file string, erases bool) (chart, error) {
	c := chart{File: file, Title: "Total bytes written per method (the paper's Fig. 9)", Caption: "Host bytes written to the simulated SSD over the whole replay, each method beside the plain filesystem's shadow device."}
	unit := "MiB written"
	if erases {
		c.Title, unit = "Erases per method (the paper's Fig. 10)", "block erases"
		c.Caption = "Block erases of the simulated SSD over the whole replay, each method beside the plain filesystem's shadow device."
	}
	labels := make([]string, len(d.Methods))
	rows := []series{{"ckptfs", nil, methodColor(0)}, {"plain fs", nil, plainColor}}
	for i, m := range d.Methods {
		labels[i] = m.Name
		dev, sh := m.Report.Device, m.Report.Shadow
		if erases {
			rows[0].Values = append(rows[0].Values, float64(dev.Erases))
			rows[1].Values = append(rows[1].Values, float64(sh.Erases))
		} else {
			rows[0].Values = append(rows[0].Values, float64(dev.HostPagesWritten)*float64(dev.PageSize)/mib)
			rows[1].Values = append(rows[1].Values, float64(sh.HostPagesWritten)*float64(sh.PageSize)/mib)
		}
	}
	p := newPlot(c.Title, "method", unit)
	if erases {
		countAxis(p)
	}
	c.Plot = p
	return c, addBars(p, labels, rows)
}

func storedVsLogicalChart(d *reportData) (chart, error) {
	c := chart{File: "stored_vs_logical.png", Title: "Stored beside logical size, per live file",
		Caption: "A store keeps no per-save history, so instead of bytes written per checkpoint this shows what each live file costs on flash (its own coded bytes, not its bases) beside its size."}
	rep := &d.Methods[0].Report
	if len(rep.FileRows) == 0 {
		c.Missing = "the store holds no files"
		return c, nil
	}
	labels := make([]string, len(rep.FileRows))
	rows := []series{{"stored", nil, methodColor(0)}, {"logical", nil, plainColor}}
	for i, f := range rep.FileRows {
		labels[i] = shortPath(f.Path)
		rows[0].Values = append(rows[0].Values, float64(f.StoredBytes)/mib)
		rows[1].Values = append(rows[1].Values, float64(f.Size)/mib)
	}
	p := newPlot(c.Title, "file", "MiB")
	c.Plot = p
	return c, addBars(p, labels, rows)
}

// shortPath keeps a label readable: the last two path elements.
func shortPath(p string) string {
	dir, base := path.Split(p)
	if dir == "" {
		return base
	}
	return path.Join(path.Base(dir), base)
}

// countTicks marks an axis of counts (erases, blocks, deltas) with whole
// numbers only, labelled every 1, 2 or 5 times a power of ten, so that a
// range of 0..3 reads 0, 1, 2, 3 and never 0.5.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi-lo < 1e15) || math.Abs(lo) > 1e15 {
		return plot.DefaultTicks{}.Ticks(lo, hi) // beyond counting; NaN too
	}
	const most = 6 // labelled ticks at most; gonum's default shows 3 to 6
	first, last := int64(math.Ceil(lo)), int64(math.Floor(hi))
	if last < first {
		return nil
	}
	step, mantissa := int64(1), int64(1)
	for k := 0; (last-first)/step > most-1; k++ {
		mantissa = []int64{2, 5, 10}[k%3]
		step = mantissa * pow10(k/3)
		if mantissa == 10 {
			mantissa = 1
		}
	}
	minor := step / 5 // 0 for a step of 1: no minor ticks
	if mantissa == 2 {
		minor = step / 2
	}
	unit := step
	if minor > 0 {
		unit = minor
	}
	var ticks []plot.Tick
	for v := ceilDiv(first, unit) * unit; v <= last; v += unit {
		t := plot.Tick{Value: float64(v)}
		if v%step == 0 {
			t.Label = strconv.FormatInt(v, 10)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func pow10(n int) int64 {
	p := int64(1)
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

// ceilDiv is a/b rounded up, for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// area is a rectangle in data coordinates that a series covers.
type area struct{ x0, x1, y0, y1 float64 }

func (a area) overlaps(b area) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

// barAreas is what grouped bars cover: per category, its group's width up
// to its tallest bar (bars of zero height cover nothing).
func barAreas(rows []series) []area {
	var out []area
	for i := 0; len(rows) > 0 && i < len(rows[0].Values); i++ {
		top := 0.0
		for _, r := range rows {
			top = max(top, r.Values[i])
		}
		if top > 0 {
			out = append(out, area{float64(i) - 0.45, float64(i) + 0.45, 0, top})
		}
	}
	return out
}

// lineAreas is what lines with points cover: each point, and points along
// each segment, as small squares the size of a marker.
func lineAreas(rows []series, dx, dy float64) []area {
	const samples = 32
	var out []area
	for _, r := range rows {
		for k, v := range r.Values {
			out = append(out, area{float64(k) - dx, float64(k) + dx, v - dy, v + dy})
			if k+1 < len(r.Values) {
				for s := 1; s < samples; s++ {
					f := float64(s) / samples
					x, y := float64(k)+f, v+f*(r.Values[k+1]-v)
					out = append(out, area{x - dx, x + dx, y - dy, y + dy})
				}
			}
		}
	}
	return out
}

// legendShare is the share of the data area's width and height that the
// legend takes, with a margin. The data area is estimated from the chart
// size less room for the axes and title, erring small so the legend errs
// large.
func legendShare(p *plot.Plot) (fx, fy float64) {
	r := p.Legend.Rectangle(draw.Canvas{})
	w, h := r.Size().X, r.Size().Y
	dataW := chartWidth - vg.Points(70)
	dataH := chartHeight - vg.Points(70)
	if p.X.Tick.Label.Rotation != 0 {
		dataH -= vg.Points(60) // slanted labels
	}
	margin := vg.Points(12)
	return float64((w + margin) / dataW), float64((h + margin) / dataH)
}

// placeLegend puts the legend in a corner of the data area that no series
// covers (top right, top left, bottom right, then bottom left); where the
// series cover all four, it raises the y axis just enough to clear a top
// corner. Call it once the plotters are added and the axes' ranges set.
func placeLegend(p *plot.Plot, covered []area) {
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	p.Y.Max += 0.04 * (p.Y.Max - p.Y.Min) // the tallest value clears the frame
	box := func(top, left bool) area { return legendBox(p, top, left) }
	free := func(b area) bool {
		for _, a := range covered {
			if a.overlaps(b) {
				return false
			}
		}
		return true
	}
	for _, c := range []struct{ top, left bool }{{true, false}, {true, true}, {false, false}, {false, true}} {
		if free(box(c.top, c.left)) {
			setLegendCorner(p, c.top, c.left)
			return
		}
	}
	// Raise the top: the corner whose span holds the lower peak needs less.
	need := func(left bool) float64 {
		b := box(true, left)
		peak := p.Y.Min
		for _, a := range covered {
			if a.x0 < b.x1 && b.x0 < a.x1 {
				peak = max(peak, a.y1)
			}
		}
		_, fy := legendShare(p)
		return p.Y.Min + (peak-p.Y.Min)/(1-min(fy, 0.8))
	}
	right, left := need(false), need(true)
	p.Y.Max = max(p.Y.Max, min(right, left))
	setLegendCorner(p, true, left < right)
}

// legendBox is the part of the data area, in data coordinates, that the
// legend takes in the given corner.
func legendBox(p *plot.Plot, top, left bool) area {
	fx, fy := legendShare(p)
	xs, ys := p.X.Max-p.X.Min, p.Y.Max-p.Y.Min
	a := area{p.X.Max - fx*xs, p.X.Max, p.Y.Min, p.Y.Min + fy*ys}
	if left {
		a.x0, a.x1 = p.X.Min, p.X.Min+fx*xs
	}
	if top {
		a.y0, a.y1 = p.Y.Max-fy*ys, p.Y.Max
	}
	return a
}

// setLegendCorner anchors the legend in a corner, inset from the axes.
func setLegendCorner(p *plot.Plot, top, left bool) {
	inset := vg.Points(6)
	p.Legend.Top, p.Legend.Left = top, left
	p.Legend.XOffs, p.Legend.YOffs = -inset, -inset
	if left {
		p.Legend.XOffs = inset
	}
	if !top {
		p.Legend.YOffs = inset
	}
}

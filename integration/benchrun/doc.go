package main

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/encode"
)

// docTemplateText is the prose of docs/BENCHMARKS.md: a text/template
// filled from the Results. The Go side below only formats numbers,
// computes derived figures and gathers tables' rows.
//
//go:embed BENCHMARKS.md.tmpl
var docTemplateText string

// docTemplate is parsed once; renderDoc executes a clone of it.
var docTemplate = template.Must(newDocTemplate(docTemplateText))

// newDocTemplate parses a document template. A key missing from a map or
// a field missing from a struct is an error when it executes, not
// "<no value>" in the document.
func newDocTemplate(text string) (*template.Template, error) {
	return template.New("BENCHMARKS.md.tmpl").Option("missingkey=error").Funcs(docFuncs(&Results{})).Parse(text)
}

// renderDoc writes docs/BENCHMARKS.md from the results: headline figures
// first, then one part per section present in r, each naming the command
// behind it.
func renderDoc(r *Results) (string, error) {
	return executeDoc(docTemplate, r)
}

// executeDoc runs t's "BENCHMARKS.md" template on r.
func executeDoc(t *template.Template, r *Results) (string, error) {
	t, err := t.Clone()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Funcs(docFuncs(r)).ExecuteTemplate(&b, "BENCHMARKS.md", r); err != nil {
		return "", err
	}
	return b.String(), nil
}

// docFuncs are the template's functions; refTierMiB knows r's machine.
func docFuncs(r *Results) template.FuncMap {
	return template.FuncMap{
		// Numbers as text.
		"f0":          func(x float64) string { return fmt.Sprintf("%.0f", x) },
		"f1":          func(x float64) string { return fmt.Sprintf("%.1f", x) },
		"f2":          f2,
		"f3":          f3,
		"f4":          func(x float64) string { return fmt.Sprintf("%.4f", x) },
		"pct":         pct,
		"mibs":        mibs,
		"secs":        secs,
		"joinF":       joinF,
		"ratioOrDash": ratioOrDash,
		"oneLine":     func(s string) string { return strings.Join(strings.Fields(s), " ") },
		"seriesName":  seriesName,
		// Arithmetic.
		"div":    func(a, b float64) float64 { return a / b },
		"sub":    func(a, b float64) float64 { return a - b },
		"mul":    func(a, b int64) int64 { return a * b },
		"inc":    func(n int) int { return n + 1 },
		"gib":    func(n int64) float64 { return float64(n) / (1 << 30) },
		"mega":   func(n int64) float64 { return float64(n) / 1e6 },
		"frac":   func(n, d int64) float64 { return float64(n) / float64(d) },
		"median": median,
		"paired": pairedRatio,
		// The runs' settings.
		"trainWidth":      func() int { return trainWidth },
		"trainSteps":      func() int { return trainSteps },
		"trainEvery":      func() int { return trainEvery },
		"trainerEvery":    func() int { return trainerEvery },
		"trainerSaves":    func() int { return trainerSaves },
		"depthSaves":      func() int { return depthSaves },
		"readGoal":        func() float64 { return readGoal },
		"scaleMountFlags": func() string { return strings.Join(scaleMountFlags, " ") },
		"save1gTargets":   func() []string { return save1gTargets },
		"resumeOps":       func() []string { return []string{"load", "read", "again"} },
		"figSeries":       func() []string { return append(append([]string{}, seriesSets...), "adam-stream") },
		"refTierMiB":      func(recorded int64) int64 { return refTierMiB(r.Machine.MemTotal, recorded) },
		// Tables' rows and derived figures.
		"list":                func(s ...string) []string { return s },
		"named":               func(name string, v any) namedRow { return namedRow{name, v} },
		"writeVolumeHeadline": writeVolumeHeadline,
		"compareTable":        compareTable,
		"table9":              table9,
		"lastSize":            func(rows []ScaleRow) ScaleRow { return rows[len(rows)-1] },
		"sizesList":           sizesList,
		"perGiB":              perGiB,
		"vsZipNN":             vsZipNN,
		"rate":                rate,
		"zipnnPairs":          zipnnPairs,
		"peerHeadline":        peerHeadline,
		"readsMet":            readsMet,
	}
}

// pairedRatio is the median over repetitions of a[i] ÷ b[i]: the two runs of
// a repetition are adjacent in time and share the machine's load.
func pairedRatio(a, b []float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	return median(rs)
}

func pct(x float64) string     { return fmt.Sprintf("%.1f%%", 100*x) }
func f2(x float64) string      { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string      { return fmt.Sprintf("%.3f", x) }
func mibs(n int64) string      { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
func secs(xs []float64) string { return joinF(xs, "%.2f") }
func joinF(xs []float64, format string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, ", ")
}

func ratioOrDash(p *float64) string {
	if p == nil {
		return "-"
	}
	return f3(*p)
}

func seriesName(set string) string {
	switch set {
	case "adam":
		return "fp32 + Adam"
	case "sgd":
		return "fp32 + SGD momentum"
	case "bf16":
		return "bf16 weights (AdamW)"
	case "adam-stream":
		return "fp32 + Adam, streaming data (harsh)"
	}
	return set
}

// mountRefTierMiB is the reference tier of a mount with the default
// --cache-mib, as a section records it.
func mountRefTierMiB() int64 { return plaincache.TierBytes(chain.MountCacheBytes) >> 20 }

// refTierMiB is the reference tier a section ran with: the one it
// recorded, or for results recorded before sections did, the default of
// their time (7/8 of an eighth of the measured machine's memory, memTotal,
// between 128 MiB and 8 GiB).
func refTierMiB(memTotal, recorded int64) int64 {
	if recorded > 0 {
		return recorded
	}
	return min(max(memTotal/8, 128<<20), 8<<30) / 8 * 7 >> 20
}

// namedRow is a table row's label and its figures.
type namedRow struct {
	Name string
	V    any
}

func (s *ReplaySection) run(series, snapDis string) *CompareRun {
	for i := range s.Compare {
		if s.Compare[i].Series == series && s.Compare[i].SnapDis == snapDis {
			return &s.Compare[i]
		}
	}
	return nil
}

func (c *CompareRun) method(name string) *MethodResult {
	if c == nil {
		return nil
	}
	for i := range c.Methods {
		if c.Methods[i].Method == name {
			return &c.Methods[i]
		}
	}
	return nil
}

// Result is a method's figures in the compare run of a series at a
// snap_dis, or nil.
func (s *ReplaySection) Result(series, snapDis, method string) *MethodResult {
	return s.run(series, snapDis).method(method)
}

// best is the snap_dis at which a method of a series wrote least.
func (s *ReplaySection) best(series, method string) (string, *MethodResult) {
	var bestSD string
	var best *MethodResult
	for _, sd := range snapDises {
		if m := s.run(series, sd).method(method); m != nil && (best == nil || m.WrittenVolumeRatio < best.WrittenVolumeRatio) {
			bestSD, best = sd, m
		}
	}
	return bestSD, best
}

// volumeFigure is a series' least write volume with planes_pr, and
// DynRLE_pr's.
type volumeFigure struct {
	Series, SnapDis string
	Planes, DynRLE  float64
}

func writeVolumeHeadline(s *ReplaySection) []volumeFigure {
	var v []volumeFigure
	for _, set := range seriesSets {
		sd, m := s.best(set, "planes_pr")
		_, dyn := s.best(set, "DynRLE_pr")
		if m == nil || dyn == nil {
			continue
		}
		v = append(v, volumeFigure{set, sd, m.WrittenVolumeRatio, dyn.WrittenVolumeRatio})
	}
	return v
}

// compareView is one series' methods × snap_dis table: a row per method
// of the first run, a cell per snap_dis run (nil where the method is not).
type compareView struct {
	Series                    string
	Files                     int
	ShadowBytes, ShadowErases int64
	SnapDises                 []string
	Rows                      []compareRow
	Command                   string // with --snap-dis N
}

type compareRow struct {
	Method string
	Cells  []*MethodResult
}

// compareTable is nil where the series has no compare run.
func compareTable(s *ReplaySection, set string) *compareView {
	var runs []*CompareRun
	v := &compareView{Series: set}
	for _, sd := range snapDises {
		if r := s.run(set, sd); r != nil {
			runs = append(runs, r)
			v.SnapDises = append(v.SnapDises, sd)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	v.Files, v.ShadowBytes, v.ShadowErases = runs[0].Files, runs[0].Methods[0].ShadowBytes, runs[0].Methods[0].ShadowErases
	for _, m := range runs[0].Methods {
		row := compareRow{Method: m.Method}
		for _, r := range runs {
			row.Cells = append(row.Cells, r.method(m.Method))
		}
		v.Rows = append(v.Rows, row)
	}
	v.Command = strings.Replace(runs[0].Command, "--snap-dis "+runs[0].SnapDis, "--snap-dis N", 1)
	return v
}

// table9View is one series of Table 9: the steps of planes and DynRLE
// under both schemes, side by side.
type table9View struct {
	Series, Command string
	Rows            []table9Row
}

type table9Row struct{ PR, CH, DPR, DCH StepResult }

// table9 is nil where a run lacks one of the four methods.
func table9(run CompareRun) *table9View {
	pr, ch := run.method("planes_pr"), run.method("planes_ch")
	dpr, dch := run.method("DynRLE_pr"), run.method("DynRLE_ch")
	if pr == nil || ch == nil || dpr == nil || dch == nil {
		return nil
	}
	v := &table9View{Series: run.Series, Command: run.Command}
	for i, st := range pr.Steps {
		v.Rows = append(v.Rows, table9Row{st, ch.Steps[i], dpr.Steps[i], dch.Steps[i]})
	}
	return v
}

func sizesList(rows []ScaleRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, mibs(r.Bytes))
	}
	return strings.Join(s, ", ")
}

// perGiB is the seconds per GiB of each size's baseline ingest, delta
// ingest or read.
func perGiB(rows []ScaleRow, which string) (string, error) {
	var v []string
	for _, r := range rows {
		var s float64
		switch which {
		case "base":
			s = r.BaseS
		case "delta":
			s = r.DeltaS
		case "read":
			s = r.ReadS
		default:
			return "", fmt.Errorf("perGiB %q: want base, delta or read", which)
		}
		v = append(v, fmt.Sprintf("%.1f", s/(float64(r.Bytes)/(1<<30))))
	}
	return strings.Join(v, ", "), nil
}

func zipnnBytes(p PeerSet, mode string) int64 {
	for _, r := range p.ZipNN {
		if r.Mode == mode && r.Threads == 1 {
			return r.Compressed
		}
	}
	return 0
}

// vsZipNN is n bytes against ZipNN's base, file by file ("-" without it).
func vsZipNN(p PeerSet, n int64) string {
	zbase := zipnnBytes(p, "base")
	if zbase == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(float64(n)/float64(zbase)-1))
}

// rate is the set's plain bytes per sec seconds in MB/s ("-" if unmeasured).
func rate(p PeerSet, sec float64) string {
	if sec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(p.PlainBytes)/sec/1e6)
}

// zipnnPair is ZipNN's run of a mode with one thread and with two.
type zipnnPair struct {
	Mode     string
	One, Two *ZipNNRun
}

func zipnnPairs(p PeerSet) []zipnnPair {
	var v []zipnnPair
	for _, mode := range []string{"base", "delta"} {
		var one, two *ZipNNRun
		for i := range p.ZipNN {
			if r := &p.ZipNN[i]; r.Mode == mode && r.Threads == 1 {
				one = r
			} else if r.Mode == mode && r.Threads == 2 {
				two = r
			}
		}
		if one != nil && two != nil {
			v = append(v, zipnnPair{mode, one, two})
		}
	}
	return v
}

// peerFigure is a series' store (the default codec at snap_dis 10)
// against ZipNN file by file and zstd -19, as stored ÷ plain bytes; Diff
// is the store against ZipNN in percent.
type peerFigure struct {
	Series                     string
	Store, ZipNN, Diff, Zstd19 float64
}

func peerHeadline(s *PeerSection) []peerFigure {
	var v []peerFigure
	for i := range s.Sets {
		p := &s.Sets[i]
		zb := zipnnBytes(*p, "base")
		var store *PeerReplay
		for j := range p.Replay {
			if r := &p.Replay[j]; r.Codec == encode.Scaled.String() && r.SnapDis == "10" {
				store = r
			}
		}
		if zb == 0 || store == nil || len(p.Zstd) < 2 {
			continue
		}
		st, zn := float64(store.StoredBytes)/float64(store.LogicalBytes), float64(zb)/float64(p.PlainBytes)
		v = append(v, peerFigure{p.Series, st, zn, 100 * (st/zn - 1), float64(p.Zstd[1].Compressed) / float64(p.PlainBytes)})
	}
	return v
}

// readGoal is issue 17's bound on a cold read out of the mount ÷ plain.
const readGoal = 1.5

// readsMet: every cold read of the headline met readGoal.
func readsMet(r *Reads) bool {
	for _, op := range []string{"load", "load_mmap", "safe_open", "cp_out"} {
		if a := r.Ops[op]; a == nil || !(a.Ratio <= readGoal) {
			return false
		}
	}
	return true
}

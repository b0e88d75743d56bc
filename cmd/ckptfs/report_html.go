package main

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
)

// writeReport draws the charts into dir as PNG files and writes
// dir/index.html showing them with a summary table. It returns the names of
// the files written, index.html last.
func writeReport(d *reportData, dir string) ([]string, error) {
	charts, err := buildCharts(d)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var written []string
	for _, c := range charts {
		if c.Plot == nil {
			continue
		}
		wt, err := c.Plot.WriterTo(chartWidth, chartHeight, "png")
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", c.File, err)
		}
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("render %s: %w", c.File, err)
		}
		if err := writeFileAtomic(filepath.Join(dir, c.File), buf.Bytes()); err != nil {
			return nil, err
		}
		written = append(written, c.File)
	}
	var page bytes.Buffer
	if err := reportPage.Execute(&page, pageData{Data: d, Charts: charts}); err != nil {
		return nil, fmt.Errorf("report page: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "index.html"), page.Bytes()); err != nil {
		return nil, err
	}
	return append(written, "index.html"), nil
}

// writeFileAtomic replaces path with data, never leaving half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

type pageData struct {
	Data   *reportData
	Charts []chart
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"thousands": thousands,
	"ratio": func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *p)
	},
	"mib": func(pages int64, pageSize int) string {
		return fmt.Sprintf("%.1f", float64(pages)*float64(pageSize)/mib)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ckptfs report: {{.Data.Source}}</title>
<style>
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; }
.missing { color: #a33; }
</style>
</head>
<body>
<h1>ckptfs report</h1>
<p>{{if eq .Data.Kind "store"}}Store <code>{{.Data.Source}}</code>.{{else}}Replay <code>{{.Data.Source}}</code>{{if eq .Data.Kind "compare"}} (--compare: {{len .Data.Methods}} methods){{end}}.{{end}}
"plain fs" is the shadow device: what a plain filesystem with a page cache would have written for the same operations.</p>
<table>
<tr><th>method</th><th>codec</th><th>scheme</th><th>snap_dis</th><th>MiB written</th><th>plain MiB written</th><th>written_volume_ratio</th><th>erases</th><th>plain erases</th><th>erase_ratio</th><th>useful_storage_pages</th></tr>
{{range .Data.Methods}}<tr><td>{{.Name}}</td><td>{{.Report.Codec}}</td><td>{{.Report.Scheme}}</td><td>{{.Report.SnapDis}}</td><td>{{mib .Report.Device.HostPagesWritten .Report.Device.PageSize}}</td><td>{{mib .Report.Shadow.HostPagesWritten .Report.Shadow.PageSize}}</td><td>{{printf "%.3f" .Report.WrittenVolumeRatio}}</td><td>{{thousands .Report.Device.Erases}}</td><td>{{thousands .Report.Shadow.Erases}}</td><td>{{ratio .Report.EraseRatio}}</td><td>{{thousands .Report.UsefulStoragePages}}</td></tr>
{{end}}</table>
{{range .Charts}}<h2>{{.Title}}</h2>
{{if .Plot}}<p><img src="{{.File}}" alt="{{.Title}}"></p>
<p>{{.Caption}}</p>{{else}}<p class="missing">Not drawn: {{.Missing}}.</p>{{end}}
{{end}}</body>
</html>
`))

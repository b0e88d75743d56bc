package main

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/ckptfs/ckptfs/encode"
)

func peersDoc(w *docWriter, s *PeerSection) {
	w.line("## 7. Side by side: ZipNN and zstd on the same files")
	w.line("")
	w.line("Each series' files as a user has them (the `.pt` files of `make series`; for the Hugging Face Trainer series every")
	w.line("file of every `checkpoint-N/` directory), sizes summed over the files, ratio = bytes ÷ plain bytes (lower is better).")
	w.line("**ZipNN** (PyPI `zipnn`, byte grouping + Huffman/zstd) compresses each whole file on its own (*base*) and, as its")
	w.line("delta mode (`delta_compressed_type=\"byte\"`: XOR with the previous version of the same file, then ZipNN), each file")
	w.line("against the previous save (*delta*; the first file of each family is a base). **zstd** is the CLI on each whole file,")
	w.line("one thread. **planes**, **scaled** (planes against a per-chunk scaled reference, docs/CODECS.md) and **dynrle** (the")
	w.line("paper's DynRLE, the reference method) are ckptfs's codecs on the same files, cut as the store cuts them (the detector's")
	w.line("tensor ranges in 64 Ki-element chunks, raw ranges in 256 KiB chunks coded as the store codes them: zstd, or stored for dynrle,")
	w.line("16-byte chunk headers included), *base* with no reference, *delta* each tensor chunk against the previous file's chunk")
	w.line("(the progressive scheme with no re-baselining); the **store** columns are `ckptfs replay` (all baselines: snap_dis 1;")
	w.line("snap_dis 10) with its metadata and page rounding: stored bytes ÷ logical bytes.")
	w.line("")
	w.line("Speeds are MB/s of plain bytes. *1 core*: CPU time (ckptfs: the coding thread's; ZipNN with `threads=1`: the Python")
	w.line("process's; zstd: the child process's), so a loaded machine does not shift them. *2 threads*: wall clock with two")
	w.line("workers (ckptfs) or `threads=2` (ZipNN), noisy on this shared machine. Every output is decoded and compared.")
	w.line("")
	if s.TrainerCommand != "" {
		w.f("Trainer series: `%s` (the demo's GPT-2: 4 layers, width 256, fp32 + AdamW, transformers Trainer, a save every 50 steps).\n\n", s.TrainerCommand)
	}
	for i := range s.Sets {
		peerSetDoc(w, &s.Sets[i])
	}
}

func peerSetDoc(w *docWriter, p *PeerSet) {
	name := seriesName(p.Series)
	if p.Series == "trainer" {
		name = "Hugging Face Trainer, GPT-2 (fp32 + AdamW)"
	}
	plain := float64(p.PlainBytes)
	w.f("**%s** (%d files, %s)\n\n", name, p.Files, mibs(p.PlainBytes))
	w.header("method", "ratio", "vs zipnn base", "enc MB/s 1 core", "dec MB/s 1 core", "enc MB/s 2 threads", "dec MB/s 2 threads")
	zbase := zipnnBytes(p, "base")
	vs := func(n int64) string {
		if zbase == 0 {
			return "-"
		}
		return fmt.Sprintf("%+.1f%%", 100*(float64(n)/float64(zbase)-1))
	}
	rate := func(sec float64) string {
		if sec <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", plain/sec/1e6)
	}
	for _, c := range p.Codecs {
		w.row(fmt.Sprintf("%s %s", c.Codec, c.Kind), fmt.Sprintf("%.4f", float64(c.Encoded)/plain), vs(c.Encoded),
			rate(c.EncCPU), rate(c.DecCPU), rate(c.EncWall2), rate(c.DecWall2))
	}
	for _, mode := range []string{"base", "delta"} {
		var one, two *ZipNNRun
		for i := range p.ZipNN {
			if r := &p.ZipNN[i]; r.Mode == mode && r.Threads == 1 {
				one = r
			} else if r.Mode == mode && r.Threads == 2 {
				two = r
			}
		}
		if one == nil || two == nil {
			continue
		}
		w.row("zipnn "+mode, fmt.Sprintf("%.4f", float64(one.Compressed)/plain), vs(one.Compressed),
			rate(one.CompCPU), rate(one.DecompCPU), rate(two.CompWall), rate(two.DecompWall))
	}
	for _, z := range p.Zstd {
		w.row(fmt.Sprintf("zstd -%d", z.Level), fmt.Sprintf("%.4f", float64(z.Compressed)/plain), vs(z.Compressed),
			rate(z.CompCPU), rate(z.DecompCPU), "-", "-")
	}
	for _, r := range p.Replay {
		w.row(fmt.Sprintf("store: %s, snap_dis %s", r.Codec, r.SnapDis), fmt.Sprintf("%.4f (written volume %.3f)", float64(r.StoredBytes)/float64(r.LogicalBytes), r.WrittenVolumeRatio),
			vs(r.StoredBytes), "-", "-", "-", "-")
	}
	w.line("")
	if p.ZipNNError != "" {
		w.f("ZipNN has no figures for this series: it failed on these files (%s; its stderr is in the run's log).\n\n", strings.Join(strings.Fields(p.ZipNNError), " "))
	}
	w.f("Commands: ZipNN `%s` (zipnn %s); zstd `%s` and `-19`; planes, scaled and dynrle: %s; store: `%s` (and the other codec and snap_dis).\n\n",
		p.ZipNNCommand, p.ZipNNVersion, p.Zstd[0].Command, p.CodecCommand, p.Replay[0].Command)
}

func zipnnBytes(p *PeerSet, mode string) int64 {
	for _, r := range p.ZipNN {
		if r.Mode == mode && r.Threads == 1 {
			return r.Compressed
		}
	}
	return 0
}

func cpuSeconds(ru *syscall.Rusage) float64 {
	if ru == nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// peersHeadline is the headline bullet: per series, the store with the
// default codec at snap_dis 10 against ZipNN file by file and zstd -19.
func peersHeadline(w *docWriter, s *PeerSection) {
	var parts []string
	for i := range s.Sets {
		p := &s.Sets[i]
		zb := zipnnBytes(p, "base")
		var store *PeerReplay
		for j := range p.Replay {
			if r := &p.Replay[j]; r.Codec == encode.Scaled.String() && r.SnapDis == "10" {
				store = r
			}
		}
		if zb == 0 || store == nil || len(p.Zstd) < 2 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3f against ZipNN %.3f (%+.1f%%) and zstd -19 %.3f", p.Series,
			float64(store.StoredBytes)/float64(store.LogicalBytes), float64(zb)/float64(p.PlainBytes),
			100*(float64(store.StoredBytes)/float64(store.LogicalBytes)/(float64(zb)/float64(p.PlainBytes))-1),
			float64(p.Zstd[1].Compressed)/float64(p.PlainBytes)))
	}
	if len(parts) > 0 {
		w.f("- **Against ZipNN and zstd** (section 7; stored ÷ logical bytes, ckptfs's `scaled` at snap_dis 10 against each tool file by file): %s.\n", strings.Join(parts, "; "))
	}
}

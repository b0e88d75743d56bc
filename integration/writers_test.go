package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Today's writers (integration/py/writers.py), run for real into a mount.
// Each writer saves writerSaves consecutive checkpoints of a tiny GPT-2.

const writerSaves = 3

// writerCase is one subcommand of writers.py and the files of its saves
// that hold float tensors: only those are required to be coded against
// their predecessor. The others (json, the scheduler's and the trainer's
// pickles, rng_state.pth, whose only tensors are uint8 generator states, dcp's
// .metadata) are small and may be baselines.
type writerCase struct {
	name    string
	tensors *regexp.Regexp
	args    []string // more writers.py flags
}

var writerCases = []writerCase{
	// The Trainer's run is the goal (ratio within 3% of replay and
	// below 0.9): a 3.2 M-parameter GPT-2 (39 MB a save), so that the
	// checkpoints, not the metadata of its sixteen small files, dominate
	// what is written, as they do in a real training.
	{"hf-trainer", regexp.MustCompile(`/(model\.safetensors|optimizer\.pt)$`), []string{"--width", "256", "--layers", "4"}},
	{"save-pretrained-sharded", regexp.MustCompile(`/model-\d+-of-\d+\.safetensors$`), nil},
	{"torch-last", regexp.MustCompile(`^(ckpt_\d+|last)\.pt$`), nil},
	{"lightning", regexp.MustCompile(`\.ckpt$`), nil},
	{"dcp", regexp.MustCompile(`/__\d+_\d+\.distcp$`), nil},
	{"dcp-2rank", regexp.MustCompile(`/__\d+_\d+\.distcp$`), nil},
	{"safetensors", regexp.MustCompile(`\.safetensors$`), nil},
}

// venvPython returns the python of the writers' venv (CKPTFS_PYTHON, which
// the Makefile exports after .ci/install-venv built it), or fails/skips.
func venvPython(t testing.TB) string {
	t.Helper()
	py := os.Getenv("CKPTFS_PYTHON")
	if py == "" {
		requireDeps(t, "the writers' venv", fmt.Errorf("CKPTFS_PYTHON is not set (make deps builds the venv, the Makefile sets it)"))
	}
	out, err := exec.Command(py, "-c", "import torch, transformers, safetensors, lightning, accelerate, numpy").CombinedOutput()
	if err != nil {
		requireDeps(t, "the writers' venv at "+py, fmt.Errorf("%v: %s", err, lastLines(out, 5)))
	}
	return py
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writerSummary is the JSON line writers.py prints.
type writerSummary struct {
	Writer      string  `json:"writer"`
	Saves       int     `json:"saves"`
	SaveSeconds float64 `json:"save_seconds"`
	Seconds     float64 `json:"seconds"`
}

// runWriter runs `writers.py name --out out --archive archive`.
func runWriter(t testing.TB, py, name, out, archive string, extra ...string) writerSummary {
	t.Helper()
	cmd := exec.Command(py, append([]string{"py/writers.py", name, "--out", out, "--archive", archive, "--saves", fmt.Sprint(writerSaves)}, extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("writers.py %s --out %s: %v\n%s", name, out, err, lastLines(stderr.Bytes(), 30))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s writerSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil || s.Saves != writerSaves {
		t.Fatalf("writers.py %s: summary %q: %v (want %d saves)", name, lines[len(lines)-1], err, writerSaves)
	}
	return s
}

// writerManifest is DIR/manifest.json of an archive: per save, the paths it
// created or rewrote, in the order they were last written.
type writerManifest struct {
	Writer string `json:"writer"`
	Saves  []struct {
		Index int      `json:"index"`
		Files []string `json:"files"`
	} `json:"saves"`
}

func readManifest(t testing.TB, archive string) writerManifest {
	t.Helper()
	var m writerManifest
	b, err := os.ReadFile(filepath.Join(archive, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatalf("archive manifest: %v", err)
	}
	if len(m.Saves) != writerSaves {
		t.Fatalf("archive %s lists %d saves, want %d", archive, len(m.Saves), writerSaves)
	}
	return m
}

// writerStats is the part of the mount's report these tests read, with the
// per-file ingest path and reference provenance. The provenance fields are
// pointers so that a binary that does not report them fails the test
// instead of reading as zero.
type writerStats struct {
	WrittenVolumeRatio float64  `json:"written_volume_ratio"`
	EveryCommitRatio   *float64 `json:"written_volume_ratio_every_commit"`
	StreamedFiles      *int64   `json:"streamed_files"`
	FallbackFiles      *int64   `json:"fallback_files"`
	Files              []struct {
		Path      string  `json:"path"`
		Size      int64   `json:"size"`
		Version   uint64  `json:"version"`
		Reference uint64  `json:"reference"`
		Depth     uint32  `json:"chain_depth"`
		Format    string  `json:"format"`
		Family    string  `json:"family"`
		Ingest    *string `json:"ingest"`
		RefReason *string `json:"ref_reason"`
		RefPath   *string `json:"ref_path"`
	} `json:"files"`
}

// tensorFormats are the detector's names for formats that hold tensors
// (encode/detect); "generic", "zip" and "unknown" are not.
var tensorFormats = map[string]bool{"torch-zip": true, "torch-legacy": true, "safetensors": true,
	"npy": true, "npz": true, "caffe": true, "dcp": true}

// mountAt mounts a fresh store (under base) at dir, which must exist.
func mountAt(t testing.TB, dir, store string, flags ...string) *mount {
	t.Helper()
	needFuse(t)
	m := &mount{t: t, dir: dir, store: store, args: flags}
	m.start()
	t.Cleanup(func() { m.stop() })
	return m
}

// TestWriters runs each of today's writers into a fresh mount (snap_dis 100,
// so no baseline falls by policy) and asserts, per writer:
//
//	(a) every save, the files rotated or rewritten away included, reads back
//	    from the mount identical to the same seeded run into a plain
//	    directory at the same path (so paths pickled into checkpoints agree);
//	    dcp's .metadata, which holds a random save id, is compared unpickled;
//	(b) every file streamed (none took the fallback), and every live file
//	    with float tensors from save k >= 2 is coded against its own
//	    predecessor: the file of save k-1 whose name differs least (last.pt
//	    against last.pt, "same-file"; shard 2 against shard 2; rank 1's
//	    __1_0.distcp against rank 1's), with chain_depth k-1 deltas past the
//	    file's first save, in the JSON report and in the file's xattrs;
//	(c) the mount's written volume ÷ the shadow's, metadata left out, is
//	    within 3% of `ckptfs replay` of the archived saves in order, and its
//	    metadata pages at most twice replay's (which commits once per
//	    save; the mount commits at its own pace);
//
// then unmounts and runs fsck --deep.
func TestWriters(t *testing.T) {
	py := venvPython(t)
	for _, c := range writerCases {
		t.Run(c.name, func(t *testing.T) { testWriter(t, py, c) })
	}
}

func testWriter(t *testing.T, py string, c writerCase) {
	base := t.TempDir()
	run := filepath.Join(base, "run")
	plain, plainArchive := filepath.Join(base, "plain"), filepath.Join(base, "plain-archive")
	mountArchive := filepath.Join(base, "mount-archive")

	// The plain run writes at the path the mount will have, then moves away.
	plainSum := runWriter(t, py, c.name, run, plainArchive, c.args...)
	if err := os.Rename(run, plain); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountAt(t, run, filepath.Join(base, "store"), "--snap-dis", "100")
	mountSum := runWriter(t, py, c.name, run, mountArchive, c.args...)

	// (a) the files left at the end, and every save as it was written.
	compareWriterTrees(t, py, plain, run)
	compareWriterTrees(t, py, plainArchive, mountArchive)
	man := readManifest(t, mountArchive)
	if pm := readManifest(t, plainArchive); !sameSaves(pm, man) {
		t.Errorf("the mount run's saves wrote other files than the plain run's:\nplain %+v\nmount %+v", pm.Saves, man.Saves)
	}

	st := readWriterStats(t, m)
	tensorFiles := checkProvenance(t, m, c, man, st)

	// (c) against an offline replay of the same saves.
	replayRep := replayArchive(t, mountArchive, man)
	// replay charges the shadow at every commit; the mount's shadow only
	// what its page cache model wrote back, the rest dirty or spared. The
	// test runs a training's minutes of saves in seconds, all within the
	// dirty expiry, so the every-commit figure is the one to compare.
	if st.EveryCommitRatio == nil {
		t.Fatal("the report lacks written_volume_ratio_every_commit")
	}
	mountRatio := *st.EveryCommitRatio
	if c.name == "hf-trainer" && mountRatio >= 0.9 {
		t.Errorf("written volume ÷ the shadow charged at every commit %.4f, want below 0.9 for the Trainer's saves", mountRatio)
	}
	// The metadata's synced commits group what changed within a second, so
	// their count is a matter of how fast the test's saves come: the data
	// is compared alone, and the metadata only as a bound.
	mountRep := m.stats()
	mountData, replayData := dataRatio(t, mountRep), dataRatio(t, replayRep)
	if rel := math.Abs(mountData-replayData) / replayData; rel > 0.03 {
		t.Errorf("data written ÷ the shadow's charged at every commit: mount %.4f, replay of the same saves %.4f (%.1f%% apart, want within 3%%)",
			mountData, replayData, 100*rel)
	}
	// The mount's synced commits follow its pace (the 1 s flush, each
	// fsync, the rotation's releases), so it may write more metadata than
	// replay's one commit per save, but not twice as much: a synced
	// transaction per operation, as before the journal, wrote 341 pages
	// for the Trainer's run against replay's 87.
	if mountRep.MetadataPages > 2*replayRep.MetadataPages {
		t.Errorf("metadata pages: mount %d, replay of the same saves %d (want at most twice)", mountRep.MetadataPages, replayRep.MetadataPages)
	}
	replayRatio := replayRep.WrittenVolumeRatio
	t.Logf("WRITER %-24s ratio mount %.4f (shadow charged at every commit: %.4f; data alone %.4f, metadata %d pages) replay %.4f (data alone %.4f, metadata %d pages) | tensor-format files %d of %d live | save s mount %.3f plain %.3f (x%.2f)",
		c.name, st.WrittenVolumeRatio, mountRatio, mountData, mountRep.MetadataPages, replayRatio, replayData, replayRep.MetadataPages, tensorFiles, len(st.Files), mountSum.SaveSeconds,
		plainSum.SaveSeconds, mountSum.SaveSeconds/plainSum.SaveSeconds)

	m.stop()
	fsck(t, m.store)
}

// sameSaves reports whether two manifests list the same files per save.
func sameSaves(a, b writerManifest) bool {
	if len(a.Saves) != len(b.Saves) {
		return false
	}
	for i := range a.Saves {
		x, y := append([]string(nil), a.Saves[i].Files...), append([]string(nil), b.Saves[i].Files...)
		sort.Strings(x)
		sort.Strings(y)
		if strings.Join(x, "\x00") != strings.Join(y, "\x00") {
			return false
		}
	}
	return true
}

// compareWriterTrees checks that the two trees hold the same files with the
// same bytes; manifest.json (it holds timings) is left to sameSaves, and
// dcp's .metadata is compared unpickled, its random save id aside.
func compareWriterTrees(t *testing.T, py, want, got string) {
	t.Helper()
	list := func(root string) map[string]bool {
		out := map[string]bool{}
		err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if fi.IsDir() && fi.Name() == ".ckptfs" && filepath.Dir(p) == root {
				return filepath.SkipDir
			}
			if fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				if rel != "manifest.json" {
					out[rel] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
		return out
	}
	lw, lg := list(want), list(got)
	if len(lw) == 0 {
		t.Fatalf("%s holds no file", want)
	}
	var metadata []string // pairs for dcp_metadata_equal.py
	for p := range lw {
		if !lg[p] {
			t.Errorf("%s: in the plain run's %s, not in %s", p, want, got)
			continue
		}
		a, b := filepath.Join(want, p), filepath.Join(got, p)
		if filepath.Base(p) == ".metadata" {
			metadata = append(metadata, a, b)
			continue
		}
		if !sameContent(t, a, b) {
			t.Errorf("%s differs from %s", b, a)
		}
	}
	if len(metadata) > 0 {
		if out, err := exec.Command(py, append([]string{"py/dcp_metadata_equal.py"}, metadata...)...).CombinedOutput(); err != nil {
			t.Errorf("dcp .metadata files differ: %v\n%s", err, out)
		}
	}
	for p := range lg {
		if !lw[p] {
			t.Errorf("%s: in %s, not in the plain run's %s", p, got, want)
		}
	}
}

// readWriterStats reads the mount's live report (.ckptfs/stats.json).
func readWriterStats(t *testing.T, m *mount) writerStats {
	t.Helper()
	var st writerStats
	m.liveStats(&st)
	return st
}

// checkProvenance is assertion (b). It returns how many live files the
// detector gave a tensor format.
func checkProvenance(t *testing.T, m *mount, c writerCase, man writerManifest, st writerStats) int {
	t.Helper()
	if st.FallbackFiles == nil || st.StreamedFiles == nil {
		t.Errorf("report has no streamed_files/fallback_files (a binary before ingest provenance)")
	} else {
		if *st.FallbackFiles != 0 {
			t.Errorf("fallback_files %d: some file did not stream", *st.FallbackFiles)
		}
		if *st.StreamedFiles == 0 {
			t.Errorf("streamed_files 0")
		}
	}
	// Which save last wrote each path.
	lastSave := map[string]int{}
	for k, s := range man.Saves {
		for _, f := range s.Files {
			lastSave[f] = k
		}
	}
	byPath := map[string]int{}
	for i, f := range st.Files {
		byPath[f.Path] = i
	}
	tensorFormatted, checked := 0, 0
	for _, f := range st.Files {
		if tensorFormats[f.Format] {
			tensorFormatted++
		}
		k, ok := lastSave[f.Path]
		if !ok {
			t.Errorf("%s: live in the mount, written by no save", f.Path)
			continue
		}
		// One error per file, listing what is wrong with it.
		var bad []string
		str := func(p *string) string {
			if p == nil {
				return "<absent>"
			}
			return *p
		}
		if str(f.Ingest) != "stream" {
			bad = append(bad, fmt.Sprintf("ingest %q, want stream", str(f.Ingest)))
		}
		bad = append(bad, xattrMismatches(m.path(f.Path), map[string]string{
			"user.ckptfs.ingest": str(f.Ingest), "user.ckptfs.ref_reason": str(f.RefReason),
			"user.ckptfs.ref_path": str(f.RefPath),
		})...)
		if k > 0 && c.tensors.MatchString(f.Path) {
			checked++
			pred, err := predecessor(f.Path, man.Saves[k-1].Files)
			if err != nil {
				t.Errorf("%s (save %d): %v", f.Path, k+1, err)
				continue
			}
			if f.Reference == 0 {
				bad = append(bad, fmt.Sprintf("a baseline (format %q), want a delta against %s", f.Format, pred))
			} else if i, live := byPath[pred]; live && pred != f.Path && st.Files[i].Version != f.Reference {
				bad = append(bad, fmt.Sprintf("reference version %d, but its predecessor %s is version %d",
					f.Reference, pred, st.Files[i].Version))
			}
			if str(f.RefPath) != pred {
				bad = append(bad, fmt.Sprintf("ref_path %q, want %q", str(f.RefPath), pred))
			}
			if pred == f.Path {
				if str(f.RefReason) != "same-file" {
					bad = append(bad, fmt.Sprintf("ref_reason %q, want same-file", str(f.RefReason)))
				}
			} else if r := str(f.RefReason); r != "family" && r != "layout" {
				bad = append(bad, fmt.Sprintf("ref_reason %q, want family or layout", r))
			}
			// k deltas since the file's first save, which may itself be
			// coded against a file of the same layout saved just before
			// it (last.pt's first save against ckpt_0010.pt).
			if f.Depth != uint32(k) && f.Depth != uint32(k+1) {
				bad = append(bad, fmt.Sprintf("chain_depth %d, want %d (or %d)", f.Depth, k, k+1))
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s (save %d of %d): %s", f.Path, k+1, len(man.Saves), strings.Join(bad, "; "))
		}
	}
	if checked == 0 {
		t.Errorf("no live file with float tensors from a save after the first: nothing checked (tensor pattern %v)", c.tensors)
	}
	return tensorFormatted
}

// xattrMismatches compares a file's provenance xattrs with the report's.
func xattrMismatches(path string, want map[string]string) []string {
	var bad []string
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		buf := make([]byte, 4096)
		n, err := syscall.Getxattr(path, name, buf)
		if err != nil {
			bad = append(bad, fmt.Sprintf("xattr %s: %v", name, err))
			continue
		}
		if got := string(buf[:n]); got != want[name] {
			bad = append(bad, fmt.Sprintf("xattr %s = %q, the report says %q", name, got, want[name]))
		}
	}
	return bad
}

var digitRun = regexp.MustCompile(`\d+`)

// predecessor picks, among the files of the previous save, the one whose
// path has the same shape (digit runs aside) and differs from p in the
// fewest digit runs: checkpoint-10/model.safetensors for
// checkpoint-15/model.safetensors, step-5/__1_0.distcp (not __0_0) for
// step-10/__1_0.distcp, last.pt for last.pt. It must be unique.
func predecessor(p string, prev []string) (string, error) {
	shape := digitRun.ReplaceAllString(p, "#")
	runs := digitRun.FindAllString(p, -1)
	best, bestDiff, ties := "", -1, 0
	for _, q := range prev {
		if digitRun.ReplaceAllString(q, "#") != shape {
			continue
		}
		d := 0
		for i, r := range digitRun.FindAllString(q, -1) {
			if r != runs[i] {
				d++
			}
		}
		switch {
		case bestDiff < 0 || d < bestDiff:
			best, bestDiff, ties = q, d, 1
		case d == bestDiff:
			ties++
		}
	}
	if bestDiff < 0 {
		return "", fmt.Errorf("no file of the previous save has the shape %s", shape)
	}
	if ties > 1 {
		return "", fmt.Errorf("%d files of the previous save are equally close to it", ties)
	}
	return best, nil
}

// replayArchive runs `ckptfs replay --snap-dis 100 --json` on every archived
// save, in order, and returns its written_volume_ratio. replay names files
// by their path below the files' common directory: here SAVE/PATH, whose
// family (digit runs replaced) is "#/" and the family of PATH in the mount.
// A file rewritten under one name (last.pt) appears as 1/last.pt, 2/last.pt,
// ...: replay cannot save two contents under one name.
func replayArchive(t *testing.T, archive string, man writerManifest) report {
	t.Helper()
	args := []string{"replay", "--snap-dis", "100", "--json", "--quiet"}
	for _, s := range man.Saves {
		for _, f := range s.Files {
			args = append(args, filepath.Join(archive, fmt.Sprint(s.Index), f))
		}
	}
	start := time.Now()
	var r report
	if err := json.Unmarshal([]byte(run(t, args...)), &r); err != nil {
		t.Fatalf("replay --json: %v", err)
	}
	t.Logf("replay of %d files: %v", len(args)-5, time.Since(start).Round(time.Millisecond))
	return r
}

// dataRatio is a report's written volume ÷ the shadow's charged at every
// commit, metadata pages left out of both.
func dataRatio(t *testing.T, r report) float64 {
	t.Helper()
	if r.EveryCommitRatio <= 0 {
		t.Fatalf("report without written_volume_ratio_every_commit: %+v", r)
	}
	shadow := float64(r.Shadow.HostPagesWritten + r.ShadowDirtyPages + r.ShadowSparedPages)
	device := r.EveryCommitRatio * shadow
	return (device - float64(r.MetadataPages)) / (shadow - float64(r.ShadowMetadataPages))
}

// TestWriterPredecessor checks how TestWriters pairs a file with its
// predecessor in the previous save (pure; no mount).
func TestWriterPredecessor(t *testing.T) {
	prev := []string{"step-5/.metadata", "step-5/__0_0.distcp", "step-5/__1_0.distcp",
		"step-5/model-00001-of-00003.safetensors", "step-5/model-00002-of-00003.safetensors",
		"ckpt_0005.pt", "last.pt", "epoch=0-step=5.ckpt", "last.ckpt"}
	for p, want := range map[string]string{
		"step-10/__1_0.distcp":                     "step-5/__1_0.distcp",
		"step-10/__0_0.distcp":                     "step-5/__0_0.distcp",
		"step-10/model-00002-of-00003.safetensors": "step-5/model-00002-of-00003.safetensors",
		"ckpt_0010.pt":                             "ckpt_0005.pt",
		"last.pt":                                  "last.pt",
		"epoch=0-step=10.ckpt":                     "epoch=0-step=5.ckpt",
		"last.ckpt":                                "last.ckpt",
	} {
		if got, err := predecessor(p, prev); err != nil || got != want {
			t.Errorf("predecessor(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	if got, err := predecessor("step-10/__2_0.distcp", prev); err == nil {
		t.Errorf("predecessor of a rank the previous save lacks: %q, want an error (two equally close)", got)
	}
	if got, err := predecessor("step-10/model.safetensors", prev); err == nil {
		t.Errorf("predecessor of a file with no shape in the previous save: %q, want an error", got)
	}
}

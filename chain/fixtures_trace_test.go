package chain

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// Reference selection (docs/REFERENCES.md) driven by today's writers: each
// writer fixture (shared/fixtures/writers/*, see its README.md) holds a small
// real checkpoint series and, in TRACE.txt, the filesystem operations the
// writer made when saving it into a mount. The test plays each trace against
// a store the way the fs layer does (fs/node.go's truncate, fs/stagingfile.go's
// staging files and their commits with Store.CommitFile at fsync and
// release, fs/node_dir_ops.go's Rename with Store.Adopt), with the bytes of
// the fixture files, and checks that every save streams and that each save
// of a file with float tensors is coded against the same file of the
// previous save. No Python, no FUSE.

// traceWritersDir is shared/fixtures/writers, beside the repository root.
const traceWritersDir = "../../shared/fixtures/writers"

// traceWriteChunk is the size of the writes a merged run is replayed in, as
// FUSE delivers them (max_write 128 KiB).
const traceWriteChunk = 128 << 10

func requireWriterFixtures(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(traceWritersDir); err != nil {
		msg := "writer fixtures missing (" + traceWritersDir + "): " + err.Error()
		if os.Getenv("CKPTFS_REQUIRE_DEPS") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg + " (set CKPTFS_REQUIRE_DEPS=1 to fail instead)")
	}
}

// tensorFile reports whether a file of the fixtures holds float tensors,
// whose every save after the first must have a reference.
func tensorFile(name string) bool {
	for _, pat := range []string{"model.safetensors", "optimizer.pt", "*.ckpt", "ckpt_*.pt", "last.pt",
		"__*_*.distcp", "model-step*.safetensors"} {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// traceWantReason is the reason docs/REFERENCES.md gives for the reference
// of a later save of p (a path relative to the writer's folder): its own
// previous content for a file rewritten in place (last.pt, last.ckpt), the
// last checkpoint found by layout for save_model's final/ copy, and the
// family's previous save for a file saved under a new path each time.
func traceWantReason(rel string) string {
	switch {
	case strings.HasPrefix(path.Base(rel), "last."):
		return meta.RefSameFile
	case strings.HasPrefix(rel, "final/"):
		return meta.RefLayout
	}
	return meta.RefFamily
}

// TestWriterTracesChooseReferences plays each writer fixture's TRACE.txt.
// Per writer it asserts: every version (every commit of every file) was
// streamed; every save after the first of a float-tensor file has a
// reference, which is exactly the previous save of the same file
// (version and ref_path), for the reason the docs give; the number of saves
// of each such file; fsck --deep is clean; every live file reads back equal
// to the bytes written.
func TestWriterTracesChooseReferences(t *testing.T) {
	requireWriterFixtures(t)
	cases := []struct {
		writer string
		saves  map[string]int // series (policy.FamilyOf of the base name): saves
	}{
		{"hf", map[string]int{"model.safetensors": 4, "optimizer.pt": 3}},
		{"dcp", map[string]int{"__0_0.distcp": 3}},
		{"lightning", map[string]int{"epoch=#-step=#.ckpt": 3, "last.ckpt": 3}},
		{"torch", map[string]int{"ckpt_#.pt": 3, "last.pt": 3}},
		{"safetensors_bf16", map[string]int{"model-step#.safetensors": 3}},
	}
	for _, c := range cases {
		t.Run(c.writer, func(t *testing.T) {
			p := newTracePlayer(t, c.writer)
			p.play()
			p.checkEnd(c.saves)
		})
	}
}

// traceFile is one regular file of a trace.
type traceFile struct {
	ino       meta.Ino
	path      string // its name now (under tracePlayer.mu: writers read it)
	final     string // the name it ends up with, relative to the writer's folder
	src       []byte // the content of its final version, where writes take their bytes
	open      bool   // has an open handle
	unlinked  bool
	staged    bool   // has a staging file whose content may differ from the committed content
	buf       []byte // the staging file's content, as written
	committed []byte // the committed content
}

// traceSave is the last save of a series of float-tensor files.
type traceSave struct {
	version meta.VersionID
	path    string
}

type tracePlayer struct {
	t      *testing.T
	s      *Store
	writer string // the fixture folder's name, the traced mount's top folder
	dir    string // the fixture folder
	ops    []ckpttest.TraceOp

	mu      sync.Mutex // guards traceFile.path
	dirs    map[string]meta.Ino
	live    map[string]*traceFile // by name now
	created map[string]*traceFile // by the name it was created under
	byIno   map[meta.Ino]*traceFile
	finals  []string // by creation order: the name each file ends up with
	nfiles  int
	series  map[string]traceSave
	saves   map[string]int
}

func newTracePlayer(t *testing.T, writer string) *tracePlayer {
	dir := filepath.Join(traceWritersDir, writer)
	text, err := os.ReadFile(filepath.Join(dir, "TRACE.txt"))
	if err != nil {
		t.Fatalf("%s: %v", writer, err) // the folder is there: a missing trace is a bug
	}
	ops, err := ckpttest.ParseTrace(string(text))
	if err != nil {
		t.Fatal(err)
	}
	var kept []ckpttest.TraceOp
	for _, op := range ops {
		if !strings.HasPrefix(op.Path, ".ckptfs/") && op.Dir != ".ckptfs" && !strings.HasPrefix(op.Dir, ".ckptfs/") {
			kept = append(kept, op)
		}
	}
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100, MaxDepth: 100})
	t.Cleanup(func() { ds.Close() })
	p := &tracePlayer{t: t, s: ds.Store, writer: writer, dir: dir, ops: kept,
		dirs:    map[string]meta.Ino{"/": meta.RootIno},
		live:    map[string]*traceFile{},
		created: map[string]*traceFile{},
		byIno:   map[meta.Ino]*traceFile{},
		series:  map[string]traceSave{},
		saves:   map[string]int{},
	}
	p.finals = p.finalNames()
	return p
}

// rel is a traced path relative to the writer's fixture folder.
func (p *tracePlayer) rel(tp string) string {
	r, ok := strings.CutPrefix(tp, p.writer+"/")
	if !ok {
		p.t.Fatalf("traced path %q is not under %s/", tp, p.writer)
	}
	return r
}

// finalNames runs through the trace's names only: the name each created
// file ends up with (its last name, even if it is unlinked later).
func (p *tracePlayer) finalNames() []string {
	var finals []string
	live := map[string]int{}
	for _, op := range p.ops {
		switch op.Op {
		case "create":
			np := ckpttest.JoinPath(op.Dir, op.Name)
			live[np] = len(finals)
			finals = append(finals, np)
		case "rename":
			from, to := ckpttest.JoinPath(op.Dir, op.Name), ckpttest.JoinPath(op.Dir, op.NewName)
			if id, ok := live[from]; ok {
				delete(live, from)
				live[to] = id
				finals[id] = to
			}
		case "unlink":
			delete(live, ckpttest.JoinPath(op.Dir, op.Name))
		}
	}
	for i := range finals {
		finals[i] = p.rel(finals[i])
	}
	return finals
}

var traceNumbers = regexp.MustCompile(`\d+`)

// source is the content of the fixture file rel, or, for a save the writer
// deleted or rewrote later (hf/checkpoint-10, the traced run's own names),
// of the file of the nearest save of its family that the fixture has.
func (p *tracePlayer) source(rel string) []byte {
	if data, err := os.ReadFile(filepath.Join(p.dir, rel)); err == nil {
		return data
	}
	fam := policy.FamilyOf(rel)
	want := traceNumbers.FindAllString(rel, -1)
	best, bestDist := "", int64(-1)
	err := filepath.WalkDir(p.dir, func(fp string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, _ := filepath.Rel(p.dir, fp)
		r = filepath.ToSlash(r)
		if policy.FamilyOf(r) != fam {
			return nil
		}
		have := traceNumbers.FindAllString(r, -1)
		if len(have) != len(want) {
			return nil
		}
		var dist int64
		for i := range have {
			a, _ := strconv.ParseInt(have[i], 10, 64)
			b, _ := strconv.ParseInt(want[i], 10, 64)
			dist += max(a-b, b-a)
		}
		if bestDist < 0 || dist < bestDist {
			best, bestDist = r, dist
		}
		return nil
	})
	if err != nil || best == "" {
		p.t.Fatalf("%s/%s: no fixture file of family %q (%v)", p.writer, rel, fam, err)
	}
	data, err := os.ReadFile(filepath.Join(p.dir, best))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("%s: bytes from %s (the fixture has no %s)", rel, best, rel)
	return data
}

func (p *tracePlayer) pathOf(f *traceFile) func() string {
	return func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return f.path
	}
}

func (p *tracePlayer) setPath(f *traceFile, np string) {
	p.mu.Lock()
	f.path = np
	p.mu.Unlock()
}

// isOpen is the fs layer's open table: whether ino has open handles.
func (p *tracePlayer) isOpen(ino meta.Ino) bool {
	f := p.byIno[ino]
	return f != nil && f.open
}

func (p *tracePlayer) dirIno(op ckpttest.TraceOp) meta.Ino {
	ino, ok := p.dirs[op.Dir]
	if !ok {
		p.t.Fatalf("line %d: no directory %q", op.Line, op.Dir)
	}
	return ino
}

// file is the file a traced path names: by its name now, else by the name
// it was created under.
func (p *tracePlayer) file(op ckpttest.TraceOp) *traceFile {
	if f := p.live[op.Path]; f != nil {
		return f
	}
	if f := p.created[op.Path]; f != nil {
		return f
	}
	p.t.Fatalf("line %d: %s of unknown file %q", op.Line, op.Op, op.Path)
	return nil
}

// releasedLater reports whether a release of tp follows op i before tp is
// created again: the trace does not record opens, so a setattr or write of
// a file with no handle comes from an open (O_TRUNC arrives as a setattr
// of the open file, without a handle).
func (p *tracePlayer) releasedLater(i int, tp string) bool {
	for _, op := range p.ops[i+1:] {
		if op.Op == "release" && op.Path == tp {
			return true
		}
		if op.Op == "create" && ckpttest.JoinPath(op.Dir, op.Name) == tp {
			return false
		}
	}
	return false
}

// stage is fs's staging file for f: empty for a new file or O_TRUNC, else
// holding the committed content.
func (p *tracePlayer) stage(f *traceFile, truncate bool) {
	if f.staged {
		return
	}
	f.staged = true
	if truncate {
		f.buf = nil
	} else {
		f.buf = append([]byte(nil), f.committed...)
	}
}

func resize(b []byte, n int64) []byte {
	if int64(len(b)) >= n {
		return b[:n]
	}
	return append(b, make([]byte, n-int64(len(b)))...)
}

// commit is fs's commit of a staging file: its content becomes the file's,
// under the name the file has now.
func (p *tracePlayer) commit(f *traceFile) {
	if !f.staged {
		return
	}
	f.staged = false
	file := stagedFile(p.t, int64(len(f.buf)), map[int64][]byte{0: f.buf})
	if err := p.s.CommitFile(f.ino, p.pathOf(f)(), file, 1); err != nil {
		p.t.Fatalf("%s: commit: %v", f.path, err)
	}
	f.committed, f.buf = f.buf, nil
	p.checkSave(f)
}

func (p *tracePlayer) play() {
	t := p.t
	for i, op := range p.ops {
		switch op.Op {
		case "mkdir":
			in, err := p.s.Names().Create(p.dirIno(op), op.Name, NewNode{Mode: syscall.S_IFDIR | 0o755})
			if err != nil {
				t.Fatalf("line %d: %v", op.Line, err)
			}
			p.dirs[ckpttest.JoinPath(op.Dir, op.Name)] = in.Ino
		case "rmdir":
			if err := p.s.Names().Rmdir(p.dirIno(op), op.Name, p.isOpen); err != nil {
				t.Fatalf("line %d: %v", op.Line, err)
			}
			delete(p.dirs, ckpttest.JoinPath(op.Dir, op.Name))
		case "create":
			in, err := p.s.Names().Create(p.dirIno(op), op.Name, NewNode{Mode: syscall.S_IFREG | 0o644})
			if err != nil {
				t.Fatalf("line %d: %v", op.Line, err)
			}
			np := ckpttest.JoinPath(op.Dir, op.Name)
			f := &traceFile{ino: in.Ino, path: np, final: p.finals[p.nfiles], open: true}
			p.nfiles++
			f.src = p.source(f.final)
			p.live[np], p.created[np], p.byIno[in.Ino] = f, f, f
		case "setattr":
			if !op.HasSize {
				continue
			}
			f := p.file(op)
			if !f.open && p.releasedLater(i, op.Path) {
				f.open = true // an untraced open; O_TRUNC comes as this setattr
			}
			if f.open {
				// fs: a truncate of a file open for writing cuts (or
				// starts) its staging file instead of committing.
				p.stage(f, op.Size == 0)
				f.buf = resize(f.buf, op.Size)
				continue
			}
			// truncate(2) of a closed file: a change committed at once.
			p.stage(f, op.Size == 0)
			f.buf = resize(f.buf, op.Size)
			p.commit(f)
		case "write":
			f := p.file(op)
			if !f.open {
				if !p.releasedLater(i, op.Path) {
					t.Fatalf("line %d: write of %s, which is not open", op.Line, op.Path)
				}
				f.open = true
			}
			p.stage(f, false)
			for off := op.Start; off < op.End; off += traceWriteChunk {
				end := min(op.End, off+traceWriteChunk)
				data := make([]byte, end-off) // zeros past the fixture's end
				if off < int64(len(f.src)) {
					copy(data, f.src[off:min(end, int64(len(f.src)))])
				}
				f.buf = resize(f.buf, max(int64(len(f.buf)), end))
				copy(f.buf[off:], data)
			}
		case "fsync":
			f := p.file(op)
			p.commit(f)
			if err := p.s.SyncData(); err != nil {
				t.Fatal(err)
			}
		case "release":
			f := p.file(op)
			p.commit(f)
			f.open = false
			if f.unlinked {
				if err := p.s.Names().Forget(f.ino); err != nil {
					t.Fatalf("line %d: forget: %v", op.Line, err)
				}
			}
		case "rename":
			from, to := ckpttest.JoinPath(op.Dir, op.Name), ckpttest.JoinPath(op.Dir, op.NewName)
			f := p.live[from]
			if f == nil {
				t.Fatalf("line %d: rename of %q: not a file of the trace (directories are not supported)", op.Line, from)
			}
			parent := p.dirIno(op)
			if err := p.s.Names().Rename(parent, op.Name, parent, op.NewName, 0, p.isOpen); err != nil {
				t.Fatalf("line %d: %v", op.Line, err)
			}
			if old := p.live[to]; old != nil {
				old.unlinked = true
			}
			delete(p.live, from)
			p.live[to] = f
			p.setPath(f, to)
			// fs: the file's content continues its new name's series.
			if err := p.s.Adopt(f.ino, to); err != nil {
				t.Fatalf("line %d: adopt: %v", op.Line, err)
			}
		case "unlink":
			np := ckpttest.JoinPath(op.Dir, op.Name)
			f := p.live[np]
			if f == nil {
				t.Fatalf("line %d: unlink of unknown file %q", op.Line, np)
			}
			if err := p.s.Names().Unlink(p.dirIno(op), op.Name, p.isOpen); err != nil {
				t.Fatalf("line %d: %v", op.Line, err)
			}
			delete(p.live, np)
			f.unlinked = true
		default:
			t.Fatalf("line %d: operation %q not played", op.Line, op.Op)
		}
	}
}

// checkSave checks the version f just committed.
func (p *tracePlayer) checkSave(f *traceFile) {
	t := p.t
	if len(f.committed) == 0 {
		return
	}
	fi := info(t, p.s, f.ino)
	cur := p.pathOf(f)()
	t.Logf("%s: version %d ref %d (%s %q) depth %d ingest %s", cur, fi.Version, fi.Reference, fi.RefReason, fi.RefPath, fi.Depth, fi.Ingest)
	if fi.Ingest != "stream" {
		t.Errorf("%s: ingest %q, want stream", cur, fi.Ingest)
	}
	base := path.Base(cur)
	if !tensorFile(base) {
		return
	}
	key := policy.FamilyOf(base)
	p.saves[key]++
	if prev, ok := p.series[key]; ok {
		want := traceWantReason(p.rel(cur))
		if fi.Reference != prev.version || fi.RefPath != prev.path || fi.RefReason != want {
			t.Errorf("%s: reference %d (%s, %q), want %d (%s, %q): the same file of the previous save",
				cur, fi.Reference, fi.RefReason, fi.RefPath, prev.version, want, prev.path)
		}
	}
	p.series[key] = traceSave{version: fi.Version, path: cur}
}

// checkEnd checks the saves counted, fsck, and every live file's content.
func (p *tracePlayer) checkEnd(wantSaves map[string]int) {
	t := p.t
	for key, n := range wantSaves {
		if p.saves[key] != n {
			t.Errorf("%s: %d saves, want %d", key, p.saves[key], n)
		}
	}
	for key := range p.saves {
		if _, ok := wantSaves[key]; !ok {
			t.Errorf("%s: %d saves of a series the test does not expect", key, p.saves[key])
		}
	}
	mustCheck(t, p.s, true)
	names := make([]string, 0, len(p.live))
	for np := range p.live {
		names = append(names, np)
	}
	sort.Strings(names)
	for _, np := range names {
		f := p.live[np]
		if f.open || f.staged {
			t.Errorf("%s: still open at the end of the trace", np)
			continue
		}
		if got := readIno(t, p.s, f.ino); !bytes.Equal(got, f.committed) {
			t.Errorf("%s: read back %d bytes differ from the %d written", np, len(got), len(f.committed))
		}
	}
}

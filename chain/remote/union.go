package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// A run is every writer's objects under one prefix. A reader shows the
// union of the writers' newest roots, cut at the least of their
// watermarks (docs/REMOTE.md, "Consistent cuts").

// CutOptions say how a reader cuts a run.
type CutOptions struct {
	// WriterTimeout: a writer silent for longer (by its own clock) no
	// longer holds the cut back (0: wait for it forever).
	WriterTimeout time.Duration
	// EmptyOK: a run nothing was uploaded to yet is an empty tree (a
	// follower waits for the first writer), not an error.
	EmptyOK bool
}

// noCut is the watermark of a writer that holds nothing back.
const noCut = math.MaxInt64

// writerView is one writer's newest root, as a reader found it.
type writerView struct {
	name      string // "" for a store that replicated alone (no writers/)
	dir       string // its objects' prefix under the run
	root      *Root
	manifests map[meta.VersionID]*Manifest
	watermark int64
	cut       int64 // files last written before it show (cutOf)

	inodes   map[meta.Ino]*meta.Inode
	children map[meta.Ino][]Dirent
	xattrs   map[meta.Ino][]Xattr
	open     map[meta.Ino]bool
}

func (w *writerView) label() string {
	if w.name == "" {
		return "(the prefix's own store)"
	}
	return w.name
}

// index builds the lookups the union walks.
func (w *writerView) index() {
	w.inodes = make(map[meta.Ino]*meta.Inode, len(w.root.Inodes))
	for i := range w.root.Inodes {
		w.inodes[w.root.Inodes[i].Ino] = &w.root.Inodes[i]
	}
	w.children = map[meta.Ino][]Dirent{}
	for _, d := range w.root.Dirents {
		w.children[d.Parent] = append(w.children[d.Parent], d)
	}
	w.xattrs = map[meta.Ino][]Xattr{}
	for _, x := range w.root.Xattrs {
		w.xattrs[x.Ino] = append(w.xattrs[x.Ino], x)
	}
	w.open = map[meta.Ino]bool{}
	for _, ino := range w.root.Open {
		w.open[ino] = true
	}
}

// shows reports whether a non-directory of the writer is in its cut: it
// was last written before the cut (its mtime lies between its creation
// and its close), and has committed content or is not being written.
func (w *writerView) shows(n *meta.Inode) bool {
	if n.Mode&syscall.S_IFMT == syscall.S_IFREG && n.Version == 0 && w.open[n.Ino] {
		return false
	}
	return n.Mtime < w.cut
}

// readWriters finds the run's writers and reads each one's newest root
// (and the manifests it names), reusing what prev already holds.
func readWriters(ctx context.Context, run bucket.Bucket, prev map[string]*writerView, o CutOptions, warned map[string]bool) ([]*writerView, error) {
	keys, err := run.List(ctx, membersDir)
	if err != nil {
		return nil, err
	}
	var views []*writerView
	for _, k := range keys {
		name, ok := strings.CutSuffix(strings.TrimPrefix(k, membersDir), ".json")
		if !ok || CheckWriterName(name) != nil {
			continue
		}
		data, err := run.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		var m Member
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("remote %s: %s: %w: %w", run, k, ErrCorrupt, err)
		}
		w, err := readWriter(ctx, run, name, prev[name])
		if err != nil {
			return nil, err
		}
		if w == nil {
			// Announced, nothing uploaded yet: it shows nothing, and holds
			// the cut at what it says.
			w = &writerView{name: name, dir: writerDir(name), root: &Root{}, watermark: m.Watermark}
			w.index()
		}
		if m.RootSeq == w.root.Seq {
			w.watermark = max(w.watermark, m.Watermark)
			if m.Closed {
				w.watermark = noCut
			}
		}
		silent := time.Duration(time.Now().UnixNano() - m.Updated)
		if w.watermark != noCut && o.WriterTimeout > 0 && silent > o.WriterTimeout {
			if !warned[name] {
				logrus.Warnf("remote %s: writer %s silent for %v: the cut no longer waits for it (its last files may be partial)", run, name, silent.Round(time.Second))
				warned[name] = true
			}
			w.watermark = noCut
		}
		views = append(views, w)
	}
	// A prefix a store replicated to alone, before writers had names.
	legacy, err := readWriter(ctx, run, "", prev[""])
	if err != nil && !errors.Is(err, errNoRoot) {
		return nil, err
	}
	if legacy != nil {
		legacy.watermark = noCut
		views = append(views, legacy)
	}
	if len(views) == 0 && !o.EmptyOK {
		return nil, fmt.Errorf("remote %s: %w", run, errNoRoot)
	}
	return views, nil
}

var errNoRoot = errors.New("nothing uploaded yet (no root)")

// readWriter reads writer name's newest root; nil if it has none. A root
// deleted between the listing and the read (the writer's GC) is looked
// for again.
func readWriter(ctx context.Context, run bucket.Bucket, name string, prev *writerView) (*writerView, error) {
	dir := writerDir(name)
	wb := bucket.Sub(run, dir)
	for attempt := 0; ; attempt++ {
		root, err := LatestRoot(ctx, wb)
		if errors.Is(err, errNoRoot) {
			if name == "" {
				return nil, err
			}
			return nil, nil
		}
		if errors.Is(err, bucket.ErrNotFound) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		w := &writerView{name: name, dir: dir, root: root, watermark: root.Watermark}
		if root.Watermark == 0 {
			w.watermark = noCut // a root from before cuts: it knows of no others
		}
		if prev != nil && prev.root.Seq == root.Seq {
			w.manifests = prev.manifests
		} else {
			w.manifests, err = fetchManifestsReusing(ctx, wb, root, prev)
			if errors.Is(err, bucket.ErrNotFound) && attempt < 3 {
				continue // collected meanwhile: a newer root names what is kept
			}
			if err != nil {
				return nil, fmt.Errorf("writer %s root %d: %w", w.label(), root.Seq, err)
			}
		}
		w.index()
		return w, nil
	}
}

// fetchManifestsReusing reads the manifests a root names, except those
// the previous root of the same writer had (a manifest never changes).
func fetchManifestsReusing(ctx context.Context, b bucket.Bucket, root *Root, prev *writerView) (map[meta.VersionID]*Manifest, error) {
	if prev == nil {
		return fetchManifests(ctx, b, root)
	}
	had := map[string]*Manifest{}
	for _, rv := range prev.root.Versions {
		if m := prev.manifests[rv.ID]; m != nil {
			had[rv.Manifest] = m
		}
	}
	missing := &Root{}
	out := map[meta.VersionID]*Manifest{}
	for _, rv := range root.Versions {
		if m := had[rv.Manifest]; m != nil && m.Version.ID == rv.ID {
			out[rv.ID] = m
		} else {
			missing.Versions = append(missing.Versions, rv)
		}
	}
	got, err := fetchManifests(ctx, b, missing)
	if err != nil {
		return nil, err
	}
	for id, m := range got {
		out[id] = m
	}
	return out, nil
}

// cutOf is the moment the reader shows the run at: the least of the
// writers' watermarks. A file shows if it was last written before it:
// every file closed before that moment on any writer is in its writer's
// root, and shows too (docs/REMOTE.md, "Consistent cuts": the clocks must
// agree better than the time between a file's close and the first write
// that depends on it on another node).
func cutOf(views []*writerView) int64 {
	cut := int64(noCut)
	for _, w := range views {
		cut = min(cut, w.watermark)
	}
	for _, w := range views {
		w.cut = cut
	}
	return cut
}

// unionIDs numbers the union's inodes and versions, the same way for the
// life of a mount: a directory by its path, a file by its writer, inode
// and content (a file rewritten is a new inode, so open handles and the
// kernel's cached pages keep the content they had), a version by its
// writer and number.
type unionIDs struct {
	dirs    map[string]meta.Ino
	files   map[fileKey]meta.Ino
	vers    map[verKey]meta.VersionID
	nextIno uint64
	nextVer uint64
}

type fileKey struct {
	writer  string
	ino     meta.Ino
	version meta.VersionID
}

type verKey struct {
	writer string
	id     meta.VersionID
}

func newUnionIDs() *unionIDs {
	return &unionIDs{dirs: map[string]meta.Ino{"": meta.RootIno}, files: map[fileKey]meta.Ino{},
		vers: map[verKey]meta.VersionID{}, nextIno: uint64(meta.RootIno)}
}

// prune forgets the numbers of inodes and versions the metadata no longer
// holds: a follower's numbering stays the size of what it shows. One that
// shows again is numbered anew.
func (ids *unionIDs) prune(inodes map[meta.Ino]bool, versions map[meta.VersionID]*Manifest) {
	for p, ino := range ids.dirs {
		if p != "" && !inodes[ino] {
			delete(ids.dirs, p)
		}
	}
	for k, ino := range ids.files {
		if !inodes[ino] {
			delete(ids.files, k)
		}
	}
	for k, id := range ids.vers {
		if versions[id] == nil {
			delete(ids.vers, k)
		}
	}
}

func (ids *unionIDs) dir(p string) meta.Ino           { return numberOf(ids.dirs, &ids.nextIno, p) }
func (ids *unionIDs) file(k fileKey) meta.Ino         { return numberOf(ids.files, &ids.nextIno, k) }
func (ids *unionIDs) version(k verKey) meta.VersionID { return numberOf(ids.vers, &ids.nextVer, k) }

// numberOf is k's number in m, the next one (after *next) if it has none.
func numberOf[K comparable, V ~uint64](m map[K]V, next *uint64, k K) V {
	if n, ok := m[k]; ok {
		return n
	}
	*next++
	m[k] = V(*next)
	return V(*next)
}

// union is the tree a reader shows: the writers' trees merged at one cut.
type union struct {
	cut       int64
	inodes    map[meta.Ino]*meta.Inode
	dirents   []Dirent
	xattrs    map[meta.Ino][]Xattr
	manifests map[meta.VersionID]*Manifest // renumbered, pieces' keys under the run
	conflicts []string
}

// merge builds the union of views at cut.
func merge(views []*writerView, cut int64, ids *unionIDs) (*union, error) {
	u := &union{cut: cut, inodes: map[meta.Ino]*meta.Inode{}, xattrs: map[meta.Ino][]Xattr{},
		manifests: map[meta.VersionID]*Manifest{}}
	var roots []cand
	for _, w := range views {
		if n := w.inodes[meta.RootIno]; n != nil {
			roots = append(roots, cand{w, n})
		}
	}
	if _, err := u.dir("", meta.RootIno, roots, ids, map[cand]bool{}); err != nil {
		return nil, err
	}
	return u, nil
}

// maxDepth bounds how deep the union walks: a root whose directories
// loop (damaged) must not recurse forever.
const maxDepth = 4096

// cand is one writer's inode at a path.
type cand struct {
	w *writerView
	n *meta.Inode
}

func isDir(n *meta.Inode) bool { return n.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// dir merges the directories cs at path p into union inode ino; it
// reports whether the directory is shown: it holds something shown, or
// one of them was last changed before the cut (the root always is).
// above holds the directories on the way here: one met again is a loop in
// a damaged root, and skipped.
func (u *union) dir(p string, ino meta.Ino, cs []cand, ids *unionIDs, above map[cand]bool) (bool, error) {
	if len(above) > maxDepth {
		return false, fmt.Errorf("/%s: directories nested deeper than %d: %w", p, maxDepth, ErrCorrupt)
	}
	for _, c := range cs {
		above[c] = true
		defer delete(above, c)
	}
	names := map[string][]cand{}
	for _, c := range cs {
		for _, d := range c.w.children[c.n.Ino] {
			if !validName(d.Name) {
				u.conflicts = append(u.conflicts, fmt.Sprintf("damaged root of %s: a name %q in /%s", c.w.label(), d.Name, p))
				continue
			}
			if n := c.w.inodes[d.Child]; n != nil {
				names[d.Name] = append(names[d.Name], cand{c.w, n})
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	subdirs, entries := uint32(0), 0
	for _, name := range sorted {
		childPath := path.Join(p, name)
		var dirs, files []cand
		for _, c := range names[name] {
			switch {
			case isDir(c.n) && above[c]:
				u.conflicts = append(u.conflicts, fmt.Sprintf("damaged root of %s: /%s loops back to a directory above it", c.w.label(), childPath))
			case isDir(c.n):
				dirs = append(dirs, c)
			case c.w.shows(c.n):
				files = append(files, c)
			}
		}
		if len(dirs) > 0 {
			cino := ids.dir(childPath)
			shown, err := u.dir(childPath, cino, dirs, ids, above)
			if err != nil {
				return false, err
			}
			if shown {
				if len(files) > 0 {
					u.conflict(childPath, append(dirs, files...), dirs[0])
				}
				u.dirents = append(u.dirents, Dirent{Parent: ino, Name: name, Child: cino})
				subdirs++
				entries++
				continue
			}
		}
		if len(files) == 0 {
			continue
		}
		best := newest(files)
		if len(files) > 1 {
			u.conflict(childPath, files, best)
		}
		fino, err := u.file(best, ids)
		if err != nil {
			return false, fmt.Errorf("%s: %w", childPath, err)
		}
		u.dirents = append(u.dirents, Dirent{Parent: ino, Name: name, Child: fino})
		entries++
	}
	shown := ino == meta.RootIno || entries > 0
	for _, c := range cs {
		shown = shown || c.n.Mtime < c.w.cut
	}
	if !shown {
		return false, nil
	}
	if len(cs) == 0 { // no writer yet: an empty root
		now := time.Now().UnixNano()
		u.inodes[ino] = &meta.Inode{Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2 + subdirs, Atime: now, Mtime: now, Ctime: now}
		return true, nil
	}
	top := newest(cs)
	n := *top.n
	n.Ino, n.Nlink, n.Version = ino, 2+subdirs, 0
	u.inodes[ino] = &n
	u.xattrs[ino] = renumberXattrs(top.w.xattrs[top.n.Ino], ino)
	return true, nil
}

// validName reports whether a directory entry's name can be shown.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 && !strings.ContainsAny(name, "/\x00")
}

// newest is the candidate last modified; between equals, the first
// writer by name.
func newest(cs []cand) cand {
	best := cs[0]
	for _, c := range cs[1:] {
		if c.n.Mtime > best.n.Mtime || c.n.Mtime == best.n.Mtime && c.w.name < best.w.name {
			best = c
		}
	}
	return best
}

// conflict notes a path that more than one writer has: shown is shown.
func (u *union) conflict(p string, cs []cand, shown cand) {
	var who []string
	for _, c := range cs {
		who = append(who, c.w.label())
	}
	u.conflicts = append(u.conflicts, fmt.Sprintf("conflict: /%s is written by %s: showing %s's", p, strings.Join(who, " and "), shown.w.label()))
}

// file adds a writer's file (any non-directory) to the union, once for
// every name it has (hard links stay links).
func (u *union) file(c cand, ids *unionIDs) (meta.Ino, error) {
	ino := ids.file(fileKey{c.w.name, c.n.Ino, c.n.Version})
	if n := u.inodes[ino]; n != nil {
		n.Nlink++
		return ino, nil
	}
	n := *c.n
	n.Ino, n.Nlink = ino, 1
	if c.n.Version != 0 {
		id, err := u.version(c.w, c.n.Version, ids)
		if err != nil {
			return 0, err
		}
		n.Version = id
		u.manifests[id].Version.Ino = ino
	}
	u.inodes[ino] = &n
	u.xattrs[ino] = renumberXattrs(c.w.xattrs[c.n.Ino], ino)
	return ino, nil
}

// version adds a writer's version and the versions it is coded against,
// which are numbered first (a reference's number is below its
// dependents', as in the store they came from).
func (u *union) version(w *writerView, id meta.VersionID, ids *unionIDs) (meta.VersionID, error) {
	if nid, ok := ids.vers[verKey{w.name, id}]; ok && u.manifests[nid] != nil {
		return nid, nil
	}
	m := w.manifests[id]
	if m == nil {
		return 0, fmt.Errorf("writer %s: version %d is not named by its root: %w", w.label(), id, ErrCorrupt)
	}
	if m.Version.Ref >= id {
		return 0, fmt.Errorf("writer %s: version %d is coded against version %d, not an earlier one: %w", w.label(), id, m.Version.Ref, ErrCorrupt)
	}
	var ref meta.VersionID
	if m.Version.Ref != 0 {
		var err error
		if ref, err = u.version(w, m.Version.Ref, ids); err != nil {
			return 0, err
		}
	}
	nid := ids.version(verKey{w.name, id})
	c := *m
	c.Version.ID, c.Version.Ref, c.Version.Ino = nid, ref, 0
	c.Pieces = make([]Piece, len(m.Pieces))
	for i, p := range m.Pieces {
		p.Key = w.dir + p.Key
		c.Pieces[i] = p
	}
	u.manifests[nid] = &c
	return nid, nil
}

func renumberXattrs(xs []Xattr, ino meta.Ino) []Xattr {
	out := make([]Xattr, len(xs))
	for i, x := range xs {
		x.Ino = ino
		out[i] = x
	}
	return out
}

// tree is the union's namespace as the store records it.
func (u *union) tree() chain.Tree {
	t := chain.Tree{Dirents: u.dirents}
	for ino, n := range u.inodes {
		t.Inodes = append(t.Inodes, *n)
		for _, x := range u.xattrs[ino] {
			x.Ino = ino
			t.Xattrs = append(t.Xattrs, x)
		}
	}
	return t
}

// apply makes the metadata in db the union's (chain.ReplaceTree): names
// that went are unlinked, inodes that went are deleted, except those inUse
// reports, which stay as orphans with their versions. It returns the
// versions the metadata keeps (with the union's manifest where it has one)
// and the inodes.
func apply(db *meta.DB, u *union, inUse func(meta.Ino) bool) (map[meta.VersionID]*Manifest, map[meta.Ino]bool, error) {
	t := u.tree()
	versions := make(map[meta.VersionID]*chain.VersionRecords, len(u.manifests))
	for id, m := range u.manifests {
		versions[id] = &chain.VersionRecords{Version: m.Version, Segments: m.Segments, Chunks: m.Chunks}
	}
	locate := func(v *meta.Version) (storage.Location, error) {
		var size int64
		for _, p := range u.manifests[v.ID].Pieces {
			size += p.Size
		}
		if size != v.PackBytes {
			return nil, fmt.Errorf("version %d: pieces hold %d bytes, its pack %d: %w", v.ID, size, v.PackBytes, ErrCorrupt)
		}
		return location(v.ID, v.PackBytes), nil
	}
	keptIDs, inodes, err := chain.ReplaceTree(db, t, versions, locate, inUse)
	if err != nil {
		return nil, nil, err
	}
	kept := make(map[meta.VersionID]*Manifest, len(keptIDs))
	for id := range keptIDs {
		if m := u.manifests[id]; m != nil {
			kept[id] = m
		} else {
			kept[id] = &Manifest{} // the replica's own record: no pieces to fetch
		}
	}
	return kept, inodes, nil
}

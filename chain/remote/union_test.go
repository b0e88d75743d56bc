package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/meta"
)

// writer is one node of a run in these tests: a store and its uploader.
type writer struct {
	t     *testing.T
	s     *chain.Store
	u     *Uploader
	cut   func() (int64, []meta.Ino)
	files map[string][]byte
}

func newWriter(t *testing.T, b bucket.Bucket, name string) *writer {
	t.Helper()
	s, dir := testStore(t)
	w := &writer{t: t, s: s, files: map[string][]byte{}}
	u, err := NewUploader(s, dir, b, Options{Writer: name, PieceSize: 64 << 10, KeepRoots: 1, Heartbeat: time.Nanosecond,
		Cut: func() (int64, []meta.Ino) {
			if w.cut == nil {
				return 0, nil
			}
			return w.cut()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(0) })
	w.u = u
	return w
}

// pass uploads what the writer holds, as the mounted uploader does
// (publishing its watermark, not a close).
func (w *writer) pass() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.u.pass(ctx); err != nil {
		w.t.Fatal(err)
	}
}

// write saves data as path (its directories made as needed).
func (w *writer) write(path string, data []byte) meta.Ino {
	w.t.Helper()
	parent := meta.RootIno
	parts := strings.Split(path, "/")
	for _, d := range parts[:len(parts)-1] {
		n, err := w.s.Names().Lookup(parent, d)
		if err != nil {
			if n, err = w.s.Names().Create(parent, d, chain.NewNode{Mode: syscall.S_IFDIR | 0o755}); err != nil {
				w.t.Fatal(err)
			}
		}
		parent = n.Ino
	}
	name := parts[len(parts)-1]
	n, err := w.s.Names().Lookup(parent, name)
	if err != nil {
		if n, err = w.s.Names().Create(parent, name, chain.NewNode{Mode: syscall.S_IFREG | 0o644}); err != nil {
			w.t.Fatal(err)
		}
	}
	fw, err := w.s.NewWriter(n.Ino, func() string { return path })
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := fw.WriteAt(data, 0, time.Now().UnixNano()); err != nil {
		w.t.Fatal(err)
	}
	if err := fw.Commit(); err != nil {
		w.t.Fatal(err)
	}
	w.files[path] = data
	return n.Ino
}

// lookup finds path in s; nil if it is not there.
func lookup(t *testing.T, s *chain.Store, path string) *meta.Inode {
	t.Helper()
	ino := meta.RootIno
	var n *meta.Inode
	for _, part := range strings.Split(path, "/") {
		var err error
		if n, err = s.Names().Lookup(ino, part); err != nil {
			return nil
		}
		ino = n.Ino
	}
	return n
}

func readVersion(t *testing.T, s *chain.Store, id meta.VersionID) []byte {
	t.Helper()
	out, err := readID(s, id)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustShow checks that the replica shows path with content want.
func mustShow(t *testing.T, r *Replica, path string, want []byte) {
	t.Helper()
	n := lookup(t, r.Store, path)
	if n == nil {
		t.Fatalf("replica does not show %s", path)
	}
	if got := readVersion(t, r.Store, n.Version); !bytes.Equal(got, want) {
		t.Fatalf("replica %s: %d bytes differ from the %d written", path, len(got), len(want))
	}
}

func mustHide(t *testing.T, r *Replica, path string) {
	t.Helper()
	if lookup(t, r.Store, path) != nil {
		t.Fatalf("replica shows %s, which the cut must hide", path)
	}
}

func blob(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*seed + i/7)
	}
	return b
}

// TestUnionOfWriters: two writers' trees under one prefix read as one:
// a directory both wrote holds both's files, a path both wrote shows the
// newer and is reported, every byte equal.
func TestUnionOfWriters(t *testing.T) {
	b := bucket.NewMemory()
	a, c := newWriter(t, b, "node-0"), newWriter(t, b, "node-1")
	a.write("step-1/__0_0.distcp", blob(3, 300_000))
	c.write("step-1/__1_0.distcp", blob(5, 300_000))
	a.write("step-1/.metadata", blob(7, 1000))
	a.write("shared.txt", []byte("from node-0"))
	time.Sleep(2 * time.Millisecond)
	c.write("shared.txt", []byte("from node-1, later"))
	a.pass()
	c.pass()
	r := openReplica(t, b)
	for _, w := range []*writer{a, c} {
		for path, data := range w.files {
			if path != "shared.txt" {
				mustShow(t, r, path, data)
			}
		}
	}
	mustShow(t, r, "shared.txt", []byte("from node-1, later"))
	if len(r.logged) != 1 {
		t.Fatalf("conflicts logged: %v, want the one of shared.txt", r.logged)
	}
	ents, err := r.Store.Names().ReadDir(lookup(t, r.Store, "step-1").Ino)
	if err != nil || len(ents) != 3 {
		t.Fatalf("step-1 lists %v (%v), want 3 files", ents, err)
	}
	// Each writer's objects are under its own name.
	for _, name := range []string{"node-0", "node-1"} {
		keys, _ := b.List(context.Background(), "writers/"+name+"/pieces/")
		if len(keys) == 0 {
			t.Fatalf("no pieces under writers/%s/", name)
		}
	}
}

// TestCutHidesWhatOthersMayLack: a file written after a moment another
// writer has not yet uploaded everything closed before is hidden, and
// shows once that writer's watermark passes it; a file being written
// with nothing committed never shows.
func TestCutHidesWhatOthersMayLack(t *testing.T) {
	b := bucket.NewMemory()
	a, c := newWriter(t, b, "node-0"), newWriter(t, b, "node-1")
	a.write("step-1/shard-0", blob(3, 100_000))
	c.write("step-1/shard-1", blob(4, 100_000))
	// node-1 closed a file at closed whose commit has not landed.
	closed := time.Now().UnixNano()
	c.cut = func() (int64, []meta.Ino) { return closed, nil }
	time.Sleep(5 * time.Millisecond)
	a.write("step-1/.metadata", blob(5, 500)) // after the barrier
	a.pass()
	c.pass()
	r := openReplica(t, b)
	mustShow(t, r, "step-1/shard-0", a.files["step-1/shard-0"])
	mustShow(t, r, "step-1/shard-1", c.files["step-1/shard-1"])
	mustHide(t, r, "step-1/.metadata")

	// The commit lands; node-1 is complete to now.
	c.write("step-1/shard-1b", blob(6, 100_000))
	c.cut = nil
	c.pass()
	a.pass() // its watermark passes shard-1b too
	if changed, err := r.Refresh(context.Background(), nil); err != nil || !changed {
		t.Fatalf("refresh: changed %v, %v", changed, err)
	}
	mustShow(t, r, "step-1/.metadata", a.files["step-1/.metadata"])
	mustShow(t, r, "step-1/shard-1b", c.files["step-1/shard-1b"])

	// A file created and being written, nothing committed: hidden.
	n, err := a.s.Names().Create(meta.RootIno, "writing.pt", chain.NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	a.cut = func() (int64, []meta.Ino) { return 0, []meta.Ino{n.Ino} }
	time.Sleep(2 * time.Millisecond)
	a.pass()
	c.pass()
	if _, err := r.Refresh(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mustHide(t, r, "writing.pt")
	// Closed empty, it shows.
	a.cut = nil
	time.Sleep(2 * time.Millisecond)
	a.pass()
	c.pass()
	if _, err := r.Refresh(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mustShow(t, r, "writing.pt", nil)
}

// TestFollowKeepsOpenFiles: a refresh adds what was uploaded and drops
// what was deleted; a file in use keeps its content until it is not.
func TestFollowKeepsOpenFiles(t *testing.T) {
	b := bucket.NewMemory()
	a := newWriter(t, b, "node-0")
	a.write("step-1/model.pt", blob(3, 200_000))
	a.pass()
	r := openReplica(t, b)
	old := lookup(t, r.Store, "step-1/model.pt")

	// The writer rotates: step-2 saved, step-1 deleted.
	a.write("step-2/model.pt", blob(4, 200_000))
	dir := lookup(t, a.s, "step-1")
	if err := a.s.Names().Unlink(dir.Ino, "model.pt", nil); err != nil {
		t.Fatal(err)
	}
	if err := a.s.Names().Rmdir(meta.RootIno, "step-1", nil); err != nil {
		t.Fatal(err)
	}
	a.u.o.KeepFor = time.Hour // the replaced root stays a while
	a.pass()
	open := func(ino meta.Ino) bool { return ino == old.Ino }
	if changed, err := r.Refresh(context.Background(), open); err != nil || !changed {
		t.Fatalf("refresh: changed %v, %v", changed, err)
	}
	r.background.Wait() // the open file's pieces fetched whole
	a.u.o.KeepFor = 0
	a.write("step-2/other.pt", blob(6, 1000))
	a.pass() // collects step-1's objects now
	r.fetch.mu.Lock()
	oldPieces := r.fetch.pieces[old.Version]
	r.fetch.mu.Unlock()
	for _, pc := range oldPieces {
		if there, _ := b.Exists(context.Background(), pc.Key); there {
			t.Fatalf("%s of the deleted step-1 is still in the bucket: the test reads nothing from the cache", pc.Key)
		}
	}
	if len(oldPieces) == 0 {
		t.Fatal("the open file's version has no pieces")
	}
	mustHide(t, r, "step-1")
	mustShow(t, r, "step-2/model.pt", a.files["step-2/model.pt"])
	if got := readVersion(t, r.Store, old.Version); !bytes.Equal(got, a.files["step-1/model.pt"]) {
		t.Fatal("an open file's content changed")
	}
	// Closed and forgotten: the next refresh lets it go.
	a.write("step-3/model.pt", blob(5, 200_000))
	a.pass()
	if _, err := r.Refresh(context.Background(), func(meta.Ino) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store.Names().Inode(old.Ino); err == nil {
		t.Fatal("a deleted file no longer in use is still kept")
	}
	if _, err := r.Store.OpenVersion(old.Version); err == nil {
		t.Fatal("the version of a deleted file no longer in use is still kept")
	}
	mustShow(t, r, "step-3/model.pt", a.files["step-3/model.pt"])
	// What it no longer shows leaves its cache and its numbering.
	for _, pc := range oldPieces {
		if _, err := os.Stat(r.fetch.donePath(pc)); err == nil {
			t.Errorf("the cache still holds %s of a version no longer kept", pc.SHA256)
		}
	}
	if n := len(r.ids.files); n != 3 {
		t.Errorf("the replica numbers %d files, it shows 3", n)
	}
}

// TestWriterGCLeavesOthersAlone: one writer deleting everything and
// collecting its garbage removes none of another writer's objects.
func TestWriterGCLeavesOthersAlone(t *testing.T) {
	b := bucket.NewMemory()
	a, c := newWriter(t, b, "node-0"), newWriter(t, b, "node-1")
	for i := 0; i < 3; i++ {
		a.write(fmt.Sprintf("a-%d", i), blob(i+3, 100_000))
		c.write(fmt.Sprintf("c-%d", i), blob(i+3, 100_000)) // the same bytes: same piece names
	}
	a.pass()
	c.pass()
	ctx := context.Background()
	before, _ := b.List(ctx, "writers/node-1/")
	for i := 0; i < 3; i++ {
		if err := a.s.Names().Unlink(meta.RootIno, fmt.Sprintf("a-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	a.pass()
	a.pass()
	if left, _ := b.List(ctx, "writers/node-0/pieces/"); len(left) != 0 {
		t.Fatalf("node-0 kept %d pieces of deleted files", len(left))
	}
	after, _ := b.List(ctx, "writers/node-1/")
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Fatalf("node-1's objects changed when node-0 collected: %d before, %d after", len(before), len(after))
	}
	r := openReplica(t, b)
	for path, data := range c.files {
		mustShow(t, r, path, data)
	}
}

// TestClosedWriterHoldsNoCut: a writer that pushed and closed does not
// hold back the files another writes later.
func TestClosedWriterHoldsNoCut(t *testing.T) {
	b := bucket.NewMemory()
	a, c := newWriter(t, b, "node-0"), newWriter(t, b, "node-1")
	c.write("old", blob(3, 1000))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.u.Push(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	a.write("new", blob(4, 1000))
	a.pass()
	r := openReplica(t, b)
	mustShow(t, r, "old", c.files["old"])
	mustShow(t, r, "new", a.files["new"])
}

// TestFollowerStartsOnEmptyRun: a follower may mount before any writer
// uploaded: an empty tree, then the first writer's files.
func TestFollowerStartsOnEmptyRun(t *testing.T) {
	b := bucket.NewMemory()
	if _, err := OpenReplica(context.Background(), t.TempDir(), b, chain.Options{}, CutOptions{}); err == nil {
		t.Fatal("a replica of an empty run opened without EmptyOK")
	}
	r, err := OpenReplica(context.Background(), t.TempDir(), b, chain.Options{}, CutOptions{EmptyOK: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ents, err := r.Store.Names().ReadDir(meta.RootIno); err != nil || len(ents) != 0 {
		t.Fatalf("empty run lists %v (%v)", ents, err)
	}
	a := newWriter(t, b, "node-0")
	a.write("step-1/model.pt", blob(3, 5000))
	a.pass()
	if changed, err := r.Refresh(context.Background(), nil); err != nil || !changed {
		t.Fatalf("refresh: changed %v, %v", changed, err)
	}
	mustShow(t, r, "step-1/model.pt", a.files["step-1/model.pt"])
}

// TestJoiningWriterHoldsCut: a writer that announced itself but has not
// uploaded yet holds the cut: what the others wrote since may depend on
// what it is about to upload.
func TestJoiningWriterHoldsCut(t *testing.T) {
	b := bucket.NewMemory()
	a, c := newWriter(t, b, "node-0"), newWriter(t, b, "node-1")
	c.write("shard-1", blob(3, 1000)) // saved, not uploaded: its watermark is unknown
	c.u.join()
	a.write("metadata", blob(4, 100))
	a.pass()
	r, err := OpenReplica(context.Background(), t.TempDir(), b, chain.Options{}, CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mustHide(t, r, "metadata")
	c.pass()
	a.pass()
	if _, err := r.Refresh(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mustShow(t, r, "metadata", a.files["metadata"])
	mustShow(t, r, "shard-1", c.files["shard-1"])
}

// FuzzMerge: a damaged or hostile root (loops, a directory linked into
// itself, names with slashes, versions coded against later ones, inodes
// naming versions no manifest has) is merged without panicking.
func FuzzMerge(f *testing.F) {
	f.Add([]byte(`{"format":1,"seq":1,"watermark_ns":5,"versions":[{"id":1,"manifest":"m"}],` +
		`"inodes":[{"Ino":1,"Mode":16877,"Mtime":1},{"Ino":2,"Mode":16877,"Mtime":1},{"Ino":3,"Mode":33188,"Mtime":1,"Version":1}],` +
		`"dirents":[{"parent":1,"name":"a","child":2},{"parent":2,"name":"f","child":3},{"parent":2,"name":"up","child":1},{"parent":2,"name":"x/y","child":3}]}`))
	f.Add([]byte(`{"inodes":[{"Ino":1,"Mode":16877}],"dirents":[{"parent":1,"name":"self","child":1}]}`))
	f.Add([]byte(`{"inodes":[{"Ino":1,"Mode":16877},{"Ino":2,"Mode":33188,"Version":7}],"dirents":[{"parent":1,"name":"f","child":2}],"open":[2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var root Root
		if json.Unmarshal(data, &root) != nil {
			return
		}
		manifests := map[meta.VersionID]*Manifest{}
		for _, rv := range root.Versions {
			// Each version coded against the one before it, or itself.
			manifests[rv.ID] = &Manifest{Version: meta.Version{ID: rv.ID, Ref: rv.ID / 2}}
		}
		w := &writerView{name: "a", dir: "writers/a/", root: &root, manifests: manifests, watermark: root.Watermark}
		w.index()
		other := &writerView{name: "b", dir: "writers/b/", root: &root, manifests: manifests, watermark: noCut}
		other.index()
		views := []*writerView{w, other}
		un, err := merge(views, cutOf(views), newUnionIDs())
		if err != nil {
			return
		}
		if un.inodes[meta.RootIno] == nil {
			t.Fatal("a merge without a root directory")
		}
		for _, d := range un.dirents {
			if un.inodes[d.Child] == nil || un.inodes[d.Parent] == nil {
				t.Fatalf("entry %+v names an inode the union lacks", d)
			}
		}
	})
}

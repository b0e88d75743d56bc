package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// replicaMark marks a store directory as a replica of a bucket (its
// content: the bucket's URL); its metadata is rebuilt at every open.
const replicaMark = "replica-of"

// replicaWorkers is the fewest read-ahead workers a replica has: its
// reads wait on the bucket more than on the cores. A view's reads of high
// records are many small GETs, so more of them in flight pays: over a
// modelled 20 ms link, 8 workers read a view 3.3x faster than 2, and 16
// no faster than 8 (BenchmarkReplicaViewLink).
const replicaWorkers = 8

// cacheDir holds a replica's fetched pieces.
const cacheDir = "cache"

// Replica is a read-only store showing the union of a run's writers at
// one cut (union.go), fetching chunks from the bucket as they are read.
type Replica struct {
	Store *chain.Store
	db    *meta.DB
	run   bucket.Bucket
	fetch *fetcher
	o     CutOptions

	mu      sync.Mutex // one refresh at a time
	views   map[string]*writerView
	ids     *unionIDs
	cut     int64
	warned  map[string]bool
	logged  map[string]bool // conflicts logged
	changes int64           // refreshes that changed the tree

	keptWhole  map[meta.VersionID]bool // open files' versions fetched whole
	background sync.WaitGroup
}

// OpenReplica rebuilds the metadata of the store in dir (empty, or a
// replica of the same bucket) from the newest roots of the run's writers,
// cut consistently, and returns a store that fetches chunks from the
// bucket as they are read.
func OpenReplica(ctx context.Context, dir string, b bucket.Bucket, o chain.Options, co CutOptions) (*Replica, error) {
	if err := prepareReplicaDir(dir, b.String()); err != nil {
		return nil, err
	}
	r := &Replica{run: b, o: co, views: map[string]*writerView{}, ids: newUnionIDs(),
		warned: map[string]bool{}, logged: map[string]bool{}, keptWhole: map[meta.VersionID]bool{}}
	views, un, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, medium.MetaFile)
	if _, err := os.Stat(path); err == nil {
		// Take the old metadata's lock first: another daemon may serve it.
		old, err := meta.Open(path, meta.Options{NoSync: true})
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", dir, err)
		}
		old.Close()
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	db, err := meta.Open(path, meta.Options{NoSync: true})
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	kept, _, err := apply(db, un, nil)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	fetch, err := newFetcher(b, filepath.Join(dir, cacheDir), piecesOf(kept))
	if err != nil {
		db.Close()
		return nil, err
	}
	fetch.retain(kept) // pieces of versions deleted since the last mount
	if o.Policy.Codec == 0 && o.Policy.Scheme == 0 {
		o.Policy = policy.Default()
	}
	o.Workers = max(o.Workers, runtime.GOMAXPROCS(0), replicaWorkers)
	store, err := chain.NewStore(db, storage.ReadOnly(fetch, ErrReadOnly), nil, o)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	r.Store, r.db, r.fetch = store, db, fetch
	r.accept(views, un)
	return r, nil
}

// read reads the writers' newest roots and merges them at their cut.
func (r *Replica) read(ctx context.Context) ([]*writerView, *union, error) {
	views, err := readWriters(ctx, r.run, r.views, r.o, r.warned)
	if err != nil {
		return nil, nil, err
	}
	un, err := merge(views, cutOf(views), r.ids)
	if err != nil {
		return nil, nil, fmt.Errorf("remote %s: %w", r.run, err)
	}
	return views, un, nil
}

// accept makes views and un the replica's current state.
func (r *Replica) accept(views []*writerView, un *union) {
	r.views = map[string]*writerView{}
	for _, w := range views {
		r.views[w.name] = w
	}
	r.cut = un.cut
	for _, c := range un.conflicts {
		if !r.logged[c] {
			r.logged[c] = true
			logrus.Warnf("remote %s: %s", r.run, c)
		}
	}
}

// Refresh shows the newest cut of the run: names that appeared are
// added, names that went are removed; an inode inUse reports (open, or
// known to the kernel) keeps its content until it is forgotten. It
// reports whether the tree changed.
func (r *Replica) Refresh(ctx context.Context, inUse func(meta.Ino) bool) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	views, un, err := r.read(ctx)
	if err != nil {
		return false, err
	}
	same := un.cut == r.cut && len(views) == len(r.views)
	for _, w := range views {
		if p := r.views[w.name]; p == nil || p.root.Seq != w.root.Seq || p.cut != w.cut {
			same = false
		}
	}
	if same {
		return false, nil
	}
	// Pieces first: a version must be readable once a name shows it.
	r.fetch.addPieces(piecesOf(un.manifests))
	kept, inodes, err := apply(r.db, un, inUse)
	if err != nil {
		return false, fmt.Errorf("remote %s: refresh: %w", r.run, err)
	}
	r.fetch.retain(kept)
	r.ids.prune(inodes, kept)
	var gone []meta.VersionID
	for id := range kept {
		if un.manifests[id] == nil && !r.keptWhole[id] {
			r.keptWhole[id] = true
			gone = append(gone, id)
		}
	}
	for id := range r.keptWhole {
		if kept[id] == nil {
			delete(r.keptWhole, id)
		}
	}
	if len(gone) > 0 {
		r.background.Add(1)
		go func() { defer r.background.Done(); r.fetch.keepWhole(gone) }()
	}
	r.accept(views, un)
	r.changes++
	return true, nil
}

// ReplicaWriter is one writer as a replica shows it.
type ReplicaWriter struct {
	Name        string `json:"name"`
	RootSeq     uint64 `json:"root_seq"`
	RootCreated int64  `json:"root_created_ns"`
	Watermark   int64  `json:"watermark_ns"` // 0: holds no cut back
	Versions    int    `json:"versions"`
}

// ReplicaStats describes what a replica shows.
type ReplicaStats struct {
	Remote    string          `json:"remote"`
	Cut       int64           `json:"cut_ns"` // 0: no writer holds it back
	Writers   []ReplicaWriter `json:"writers"`
	Refreshes int64           `json:"refreshes"`
	// BytesFetched is what reads fetched from the bucket, in Fetches
	// ranged reads, since the replica was opened.
	BytesFetched int64 `json:"bytes_fetched"`
	Fetches      int64 `json:"fetches"`
}

// Stats reports the writers and the cut shown.
func (r *Replica) Stats() ReplicaStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReplicaStats{Remote: r.run.String(), Refreshes: r.changes,
		BytesFetched: r.fetch.fetched.Load(), Fetches: r.fetch.gets.Load()}
	if r.cut != noCut {
		st.Cut = r.cut
	}
	for _, w := range r.views {
		rw := ReplicaWriter{Name: w.name, RootSeq: w.root.Seq, RootCreated: w.root.Created, Versions: len(w.root.Versions)}
		if w.watermark != noCut {
			rw.Watermark = w.watermark
		}
		st.Writers = append(st.Writers, rw)
	}
	sort.Slice(st.Writers, func(i, j int) bool { return st.Writers[i].Name < st.Writers[j].Name })
	return st
}

// Describe names what the replica shows, for the mount's log line.
func (r *Replica) Describe() string {
	st := r.Stats()
	var parts []string
	for _, w := range st.Writers {
		name := w.Name
		if name == "" {
			name = "root"
		} else {
			name = "writer " + name + " root"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, w.RootSeq))
	}
	return strings.Join(parts, ", ")
}

func piecesOf(ms map[meta.VersionID]*Manifest) map[meta.VersionID][]Piece {
	out := make(map[meta.VersionID][]Piece, len(ms))
	for id, m := range ms {
		if len(m.Pieces) > 0 {
			out[id] = m.Pieces
		}
	}
	return out
}

// Close closes the replica's store.
func (r *Replica) Close() error {
	r.background.Wait()
	r.Store.Close()
	r.db.Seal()
	return r.db.Close()
}

// prepareReplicaDir refuses a directory that holds a store of its own (or
// a replica of another bucket) and marks it a replica of url.
func prepareReplicaDir(dir, url string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("replica %s: %w", dir, err)
	}
	mark := filepath.Join(dir, replicaMark)
	b, err := os.ReadFile(mark)
	switch {
	case err == nil && strings.TrimSpace(string(b)) != url:
		return fmt.Errorf("store %s is a replica of %s, not of %s: use another --store", dir, strings.TrimSpace(string(b)), url)
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(dir, medium.MetaFile)); err == nil {
			return fmt.Errorf("store %s holds a store of its own: a read-only remote mount needs an empty store directory (or one it made before)", dir)
		}
		if err := os.WriteFile(mark, []byte(url+"\n"), 0o600); err != nil {
			return fmt.Errorf("replica %s: %w", dir, err)
		}
	case err != nil:
		return fmt.Errorf("replica %s: %w", dir, err)
	}
	return nil
}

// CheckNotReplica refuses a store directory that holds a read-only
// replica: its metadata points into a bucket, not at a device.
func CheckNotReplica(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, replicaMark))
	if err != nil {
		return nil
	}
	url := strings.TrimSpace(string(b))
	return fmt.Errorf("store %s is a read-only replica of %s: mount it with --remote %s --read-only", dir, url, url)
}

// LatestRoot reads the bucket's newest root.
func LatestRoot(ctx context.Context, b bucket.Bucket) (*Root, error) {
	keys, err := b.List(ctx, rootsDir)
	if err != nil {
		return nil, err
	}
	var best uint64
	for _, k := range keys {
		if n, ok := rootSeq(k); ok {
			best = max(best, n)
		}
	}
	if best == 0 {
		return nil, fmt.Errorf("remote %s: %w", b, errNoRoot)
	}
	data, err := b.Get(ctx, rootKey(best))
	if err != nil {
		return nil, err
	}
	var r Root
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("remote %s: root %d: %w: %w", b, best, ErrCorrupt, err)
	}
	if r.Format > formatVersion {
		return nil, fmt.Errorf("remote %s: root %d is of format %d, newer than this ckptfs (%d)", b, best, r.Format, formatVersion)
	}
	return &r, nil
}

// fetchManifests reads (and checks) the manifests a root names, a few at
// a time.
func fetchManifests(ctx context.Context, b bucket.Bucket, root *Root) (map[meta.VersionID]*Manifest, error) {
	out := make(map[meta.VersionID]*Manifest, len(root.Versions))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	sem := make(chan struct{}, 8)
	for _, rv := range root.Versions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, err := fetchManifest(ctx, b, rv)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out[rv.ID] = m
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

func fetchManifest(ctx context.Context, b bucket.Bucket, rv RootVersion) (*Manifest, error) {
	data, err := b.Get(ctx, rv.Manifest)
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", rv.ID, err)
	}
	m, err := decodeManifest(rv.Manifest, data)
	if err != nil {
		return nil, err
	}
	if m.Version.ID != rv.ID {
		return nil, fmt.Errorf("manifest %s is of version %d, root names it for %d: %w", rv.Manifest, m.Version.ID, rv.ID, ErrCorrupt)
	}
	return m, nil
}

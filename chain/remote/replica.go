package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/meta"
)

// replicaMark marks a store directory as a replica of a bucket (its
// content: the bucket's URL); its metadata is rebuilt at every open.
const replicaMark = "replica-of"

// cacheDir holds a replica's fetched pieces.
const cacheDir = "cache"

// Replica is a read-only store rebuilt from a bucket's newest root.
type Replica struct {
	Store *chain.Store
	Root  *Root
	db    *meta.DB
}

// OpenReplica rebuilds the metadata of the store in dir (empty, or a
// replica of the same bucket) from the bucket's newest root, and returns a
// store that fetches chunks from the bucket as they are read.
func OpenReplica(ctx context.Context, dir string, b bucket.Bucket, o chain.Options) (*Replica, error) {
	if err := prepareReplicaDir(dir, b.String()); err != nil {
		return nil, err
	}
	root, err := LatestRoot(ctx, b)
	if err != nil {
		return nil, err
	}
	manifests, err := fetchManifests(ctx, b, root)
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
	pieces, err := rebuild(db, root, manifests)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replica %s: root %d: %w", dir, root.Seq, err)
	}
	fetch, err := newFetcher(b, filepath.Join(dir, cacheDir), pieces)
	if err != nil {
		db.Close()
		return nil, err
	}
	if o.Policy.Codec == 0 && o.Policy.Scheme == 0 {
		o.Policy = policy.Default()
	}
	store, err := chain.NewStore(db, fetch, nil, o)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	return &Replica{Store: store, Root: root, db: db}, nil
}

// Close closes the replica's store.
func (r *Replica) Close() error {
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
		return nil, fmt.Errorf("remote %s: nothing uploaded yet (no root)", b)
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

// rebuild writes a root's inodes, names and versions into an empty
// metadata database, in one transaction. Versions are live if an inode
// holds them and count the versions coded against them, as in the store
// they came from; their packs are at location(id).
func rebuild(db *meta.DB, root *Root, manifests map[meta.VersionID]*Manifest) (map[meta.VersionID][]Piece, error) {
	pieces := make(map[meta.VersionID][]Piece, len(manifests))
	live := map[meta.VersionID]bool{}
	deps := map[meta.VersionID]uint32{}
	for _, n := range root.Inodes {
		if n.Version != 0 {
			live[n.Version] = true
		}
	}
	for _, m := range manifests {
		if m.Version.Ref != 0 {
			deps[m.Version.Ref]++
		}
	}
	err := db.Update(func(tx *meta.Tx) error {
		maxIno, err := putTree(tx, root, manifests)
		if err != nil {
			return err
		}
		var maxVersion uint64
		var logical, stored int64
		for id, m := range manifests {
			v := m.Version
			if v.Ref != 0 && manifests[v.Ref] == nil {
				return fmt.Errorf("version %d is coded against version %d, which the root does not name: %w", id, v.Ref, ErrCorrupt)
			}
			var size int64
			for _, p := range m.Pieces {
				size += p.Size
			}
			if size != v.PackBytes {
				return fmt.Errorf("version %d: pieces hold %d bytes, its pack %d: %w", id, size, v.PackBytes, ErrCorrupt)
			}
			v.Pack = location(id, v.PackBytes)
			v.Live, v.Dependents = live[id], deps[id]
			if err := tx.PutVersion(&v); err != nil {
				return err
			}
			for i := range m.Segments {
				if err := tx.PutSegment(id, &m.Segments[i]); err != nil {
					return err
				}
			}
			for i := range m.Chunks {
				if err := tx.PutChunk(id, &m.Chunks[i]); err != nil {
					return err
				}
			}
			pieces[id] = m.Pieces
			maxVersion = max(maxVersion, uint64(id))
			if v.Live {
				logical += v.Size
			}
			stored += v.PackBytes
		}
		for name, v := range map[string]uint64{"next_ino": maxIno, "next_version": maxVersion,
			"logical_bytes": uint64(logical), "stored_bytes": uint64(stored)} {
			if err := tx.SetCounter(name, v); err != nil {
				return err
			}
		}
		return nil
	})
	return pieces, err
}

// putTree writes a root's inodes, names and xattrs; every version an inode
// holds must be among manifests. It returns the highest inode number.
func putTree(tx *meta.Tx, root *Root, manifests map[meta.VersionID]*Manifest) (uint64, error) {
	var maxIno uint64
	for i := range root.Inodes {
		n := root.Inodes[i]
		if n.Version != 0 && manifests[n.Version] == nil {
			return 0, fmt.Errorf("inode %d holds version %d, which the root does not name: %w", n.Ino, n.Version, ErrCorrupt)
		}
		if err := tx.PutInode(&n); err != nil {
			return 0, err
		}
		maxIno = max(maxIno, uint64(n.Ino))
	}
	for _, d := range root.Dirents {
		if err := tx.Link(d.Parent, d.Name, d.Child); err != nil {
			return 0, err
		}
	}
	for _, x := range root.Xattrs {
		if err := tx.SetXattr(x.Ino, x.Name, x.Value); err != nil {
			return 0, err
		}
	}
	return maxIno, nil
}

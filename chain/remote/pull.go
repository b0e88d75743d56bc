package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// PullStats says what a pull copied.
type PullStats struct {
	Root         uint64 `json:"root_seq"`
	Versions     int    `json:"versions"`
	Files        int    `json:"files"`
	BytesFetched int64  `json:"bytes_fetched"`
	LogicalBytes int64  `json:"logical_bytes"`
}

// Pull copies the bucket's newest root into store, which must be empty:
// every version's pieces, each checked against its SHA-256, written
// through the store's backend under the version's own number, then the
// tree of names. Every file is then read back once, which checks every
// chunk's checksum and each file's.
func Pull(ctx context.Context, b bucket.Bucket, store *chain.Store) (PullStats, error) {
	var ps PullStats
	if empty, err := store.Empty(); err != nil || !empty {
		return ps, errors.Join(err, errors.New("pull needs an empty store"))
	}
	views, err := readWriters(ctx, b, nil, CutOptions{}, map[string]bool{})
	if err != nil {
		return ps, err
	}
	un, err := merge(views, cutOf(views), newUnionIDs())
	if err != nil {
		return ps, fmt.Errorf("pull %s: %w", b, err)
	}
	for _, w := range views {
		ps.Root = max(ps.Root, w.root.Seq)
	}
	for _, c := range un.conflicts {
		logrus.Warnf("pull %s: %s", b, c)
	}
	manifests := un.manifests
	ps.Versions = len(manifests)
	live := map[meta.VersionID]bool{}
	deps := map[meta.VersionID]uint32{}
	for _, n := range un.inodes {
		live[n.Version] = n.Version != 0
	}
	for _, m := range manifests {
		if m.Version.Ref != 0 {
			deps[m.Version.Ref]++
		}
	}
	ids := make([]meta.VersionID, 0, len(manifests))
	for id := range manifests {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		m := manifests[id]
		v := m.Version
		v.Live, v.Dependents = live[id], deps[id]
		pr := &pieceStream{ctx: ctx, b: b, pieces: m.Pieces}
		if err := store.ImportVersion(v, m.Segments, m.Chunks, pr); err != nil {
			return ps, err
		}
		ps.BytesFetched += pr.fetched
	}
	err = store.ImportTree(un.tree())
	if err != nil {
		return ps, fmt.Errorf("pull %s: %w", b, err)
	}
	for _, n := range un.inodes {
		if n.Version == 0 {
			continue
		}
		if err := readWhole(store, n.Version); err != nil {
			return ps, fmt.Errorf("pull: check inode %d: %w", n.Ino, err)
		}
		ps.Files++
		ps.LogicalBytes += n.Size
	}
	return ps, nil
}

// readWhole reads a version through a Reader (chunk and file checksums).
func readWhole(store *chain.Store, id meta.VersionID) error {
	r, err := store.OpenVersion(id)
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for off := int64(0); off < r.Size(); off += int64(len(buf)) {
		n := min(int64(len(buf)), r.Size()-off)
		if _, err := r.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// pieceStream reads a version's pack from its pieces, one whole piece at
// a time, each checked against its SHA-256.
type pieceStream struct {
	ctx     context.Context
	b       bucket.Bucket
	pieces  []Piece
	cur     *bytes.Reader
	fetched int64
}

func (p *pieceStream) Read(buf []byte) (int, error) {
	for p.cur == nil || p.cur.Len() == 0 {
		if len(p.pieces) == 0 {
			return 0, io.EOF
		}
		pc := p.pieces[0]
		p.pieces = p.pieces[1:]
		data, err := p.b.Get(p.ctx, pc.Key)
		if err != nil {
			return 0, err
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != pc.SHA256 || int64(len(data)) != pc.Size {
			return 0, fmt.Errorf("object %s: SHA-256 %s of %d bytes, want %s of %d: %w", pc.Key, got, len(data), pc.SHA256, pc.Size, ErrCorrupt)
		}
		p.fetched += int64(len(data))
		p.cur = bytes.NewReader(data)
	}
	return p.cur.Read(buf)
}

package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// fetchBlock is the unit a fetcher asks the bucket for and caches: ranged
// reads of whole blocks, so that neighbouring chunks come along.
const fetchBlock = 1 << 20

// blockSize is the unit of space of a replica's locations.
const blockSize = 4096

// ErrReadOnly is what a replica answers to writes.
var ErrReadOnly = errors.New("read-only replica of a remote store")

// fetcher is the storage.Backend of a replica: a version's pack is at
// location [id<<32, blocks), its bytes in the pieces its manifest names,
// fetched from the bucket by range on first read and kept in a cache file
// per piece. A piece fetched whole is checked against its SHA-256 and the
// cache file renamed <sha>.done, which a later mount trusts.
type fetcher struct {
	b      bucket.Bucket
	dir    string
	pieces map[meta.VersionID][]Piece

	mu     sync.Mutex
	states map[string]*pieceState
}

type pieceState struct {
	mu   sync.Mutex
	have []bool // blocks in the cache file
	done bool   // whole, verified: the file is <sha>.done
}

func newFetcher(b bucket.Bucket, dir string, pieces map[meta.VersionID][]Piece) (*fetcher, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("chunk cache %s: %w", dir, err)
	}
	return &fetcher{b: b, dir: dir, pieces: pieces, states: map[string]*pieceState{}}, nil
}

// location is where a replica records version id's pack.
func location(id meta.VersionID, packBytes int64) storage.Location {
	return storage.Location{{Start: int64(id) << 32, Len: (packBytes + blockSize - 1) / blockSize}}
}

func (f *fetcher) BlockSize() int { return blockSize }

func (f *fetcher) ReadAt(loc storage.Location, p []byte, off int64) error {
	if len(loc) != 1 {
		return fmt.Errorf("replica location %v: %w", loc, storage.ErrShortLocation)
	}
	id := meta.VersionID(loc[0].Start >> 32)
	pieces := f.pieces[id]
	end := off + int64(len(p))
	if len(pieces) == 0 || off < 0 || end > pieces[len(pieces)-1].Offset+pieces[len(pieces)-1].Size {
		return fmt.Errorf("version %d pack [%d,%d): %w", id, off, end, storage.ErrShortLocation)
	}
	i := sort.Search(len(pieces), func(i int) bool { return pieces[i].Offset+pieces[i].Size > off })
	for ; len(p) > 0; i++ {
		pc := pieces[i]
		in := off - pc.Offset
		n := min(int64(len(p)), pc.Size-in)
		if err := f.readPiece(pc, p[:n], in); err != nil {
			return fmt.Errorf("version %d: %w", id, err)
		}
		p, off = p[n:], off+n
	}
	return nil
}

func (f *fetcher) state(pc Piece) *pieceState {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.states[pc.Key]
	if ps == nil {
		ps = &pieceState{have: make([]bool, (pc.Size+fetchBlock-1)/fetchBlock)}
		if _, err := os.Stat(f.donePath(pc)); err == nil {
			ps.done = true
		}
		f.states[pc.Key] = ps
	}
	return ps
}

func (f *fetcher) partPath(pc Piece) string { return filepath.Join(f.dir, pc.SHA256+".part") }
func (f *fetcher) donePath(pc Piece) string { return filepath.Join(f.dir, pc.SHA256+".done") }

// readPiece fills p from piece pc at offset off, fetching the blocks the
// cache lacks with one ranged read.
func (f *fetcher) readPiece(pc Piece, p []byte, off int64) error {
	ps := f.state(pc)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	path := f.donePath(pc)
	if !ps.done {
		path = f.partPath(pc)
		first, last := off/fetchBlock, (off+int64(len(p))-1)/fetchBlock
		lo, hi := int64(-1), int64(-1)
		for b := first; b <= last; b++ {
			if !ps.have[b] {
				if lo < 0 {
					lo = b
				}
				hi = b
			}
		}
		if lo >= 0 {
			if err := f.fetch(pc, ps, lo, hi); err != nil {
				return err
			}
		}
		if ps.done {
			path = f.donePath(pc)
		}
	}
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("chunk cache: %w", err)
	}
	defer file.Close()
	if _, err := file.ReadAt(p, off); err != nil {
		return fmt.Errorf("chunk cache %s: %w", path, err)
	}
	return nil
}

// fetch reads blocks [lo, hi] of a piece from the bucket into its cache
// file, retrying a few times on failure.
func (f *fetcher) fetch(pc Piece, ps *pieceState, lo, hi int64) error {
	start := lo * fetchBlock
	end := min(pc.Size, (hi+1)*fetchBlock)
	buf := make([]byte, end-start)
	var err error
	delay := 200 * time.Millisecond
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = f.b.ReadAt(ctx, pc.Key, buf, start)
		cancel()
		if err == nil || errors.Is(err, bucket.ErrDenied) || errors.Is(err, bucket.ErrNotFound) {
			break
		}
		logrus.Warnf("remote %s: read %s [%d,%d) failed, retrying in %v: %v", f.b, pc.Key, start, end, delay, err)
		time.Sleep(delay)
		delay *= 2
	}
	if err != nil {
		return fmt.Errorf("fetch %s [%d,%d): %w", pc.Key, start, end, err)
	}
	file, err := os.OpenFile(f.partPath(pc), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("chunk cache: %w", err)
	}
	_, err = file.WriteAt(buf, start)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chunk cache %s: %w", f.partPath(pc), err)
	}
	for b := lo; b <= hi; b++ {
		ps.have[b] = true
	}
	for _, h := range ps.have {
		if !h {
			return nil
		}
	}
	return f.seal(pc, ps)
}

// seal checks a piece the cache holds whole against its SHA-256. A match
// is kept as <sha>.done; a mismatch is logged (the chunks' own checksums
// then fail the reads of the damaged range, and only those).
func (f *fetcher) seal(pc Piece, ps *pieceState) error {
	file, err := os.Open(f.partPath(pc))
	if err != nil {
		return fmt.Errorf("chunk cache: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, io.NewSectionReader(file, 0, pc.Size))
	file.Close()
	if err != nil {
		return fmt.Errorf("chunk cache %s: %w", f.partPath(pc), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != pc.SHA256 {
		logrus.Errorf("remote %s: object %s is corrupt: its SHA-256 is %s: %v", f.b, pc.Key, got, ErrCorrupt)
		return nil
	}
	if err := os.Rename(f.partPath(pc), f.donePath(pc)); err != nil {
		return fmt.Errorf("chunk cache: %w", err)
	}
	ps.done = true
	return nil
}

func (f *fetcher) Write(data []byte) (storage.Location, error) { return nil, ErrReadOnly }
func (f *fetcher) Commit(tx *meta.Tx, loc storage.Location) error {
	return ErrReadOnly
}
func (f *fetcher) Free(tx *meta.Tx, loc storage.Location) error { return nil }
func (f *fetcher) Release(loc storage.Location)                 {}
func (f *fetcher) Recover(tx *meta.Tx, clean bool) error        { return nil }
func (f *fetcher) Space() (total, free int64)                   { return 1, 0 }
func (f *fetcher) Sync() error                                  { return nil }
func (f *fetcher) Check(tx *meta.Tx, used []storage.Owned, problem func(kind, format string, args ...any)) error {
	return nil
}

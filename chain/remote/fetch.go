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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// fetchBlock is the unit a fetcher asks the bucket for on a read: ranged
// reads of whole blocks, so that neighbouring chunks come along. A sparse
// read (ReadAtSparse: a view's high records) asks for its own pages only.
const fetchBlock = 1 << 20

// blockSize is the unit of space of a replica's locations, and the page
// its cache keeps track of.
const blockSize = 4096

// pagesPerBlock is how many cache pages a fetch block holds.
const pagesPerBlock = fetchBlock / blockSize

// ErrReadOnly is what a replica answers to writes.
var ErrReadOnly = errors.New("read-only replica of a remote store")

// fetcher is the storage.Source of a replica: a version's pack is at
// location [id<<32, blocks), its bytes in the pieces its manifest names,
// fetched from the bucket by range on first read and kept in a cache file
// per piece. A piece fetched whole is checked against its SHA-256 and the
// cache file renamed <sha>.done, which a later mount trusts.
type fetcher struct {
	b   bucket.Bucket
	dir string

	mu     sync.Mutex
	pieces map[meta.VersionID][]Piece // a follower adds and drops versions
	states map[string]*pieceState
	slots  chan struct{} // reads ahead in flight

	fetched atomic.Int64 // bytes read from the bucket
	gets    atomic.Int64 // ranged reads that brought them
}

// addPieces makes versions readable (a refresh, before names show them).
func (f *fetcher) addPieces(ps map[meta.VersionID][]Piece) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, p := range ps {
		f.pieces[id] = p
	}
}

// keepWhole fetches every piece of versions ids into the cache (those
// not there yet): files still open whose names went, which the writers'
// GC may delete from the bucket later.
func (f *fetcher) keepWhole(ids []meta.VersionID) {
	for _, id := range ids {
		f.mu.Lock()
		pieces := f.pieces[id]
		f.mu.Unlock()
		for _, pc := range pieces {
			ps := f.state(pc)
			if err := f.ensure(pc, ps, 0, ps.pages-1); err != nil {
				logrus.WithError(err).Warnf("remote %s: keep version %d of an open file", f.b, id)
				break
			}
		}
	}
}

// retain forgets the pieces of versions the metadata no longer keeps, and
// deletes their cache files: a follower's cache holds what the run keeps,
// not everything it ever read.
func (f *fetcher) retain(kept map[meta.VersionID]*Manifest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys, shas := map[string]bool{}, map[string]bool{}
	for id, pieces := range f.pieces {
		if kept[id] == nil {
			delete(f.pieces, id)
			continue
		}
		for _, p := range pieces {
			keys[p.Key], shas[p.SHA256] = true, true
		}
	}
	for key := range f.states {
		if !keys[key] {
			delete(f.states, key)
		}
	}
	f.pruneCache(shas)
}

// pruneCache deletes the cache files of pieces not in keep (by SHA-256).
func (f *fetcher) pruneCache(keep map[string]bool) {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		sum, ok := strings.CutSuffix(name, ".done")
		if !ok {
			sum, ok = strings.CutSuffix(name, ".part")
		}
		if ok && !keep[sum] {
			if err := os.Remove(filepath.Join(f.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				logrus.WithError(err).Warn("chunk cache: remove a piece no version needs")
			}
		}
	}
}

type pieceState struct {
	mu      sync.Mutex
	pages   int64                   // of blockSize bytes, the last one short
	have    []uint64                // bitmap of the pages in the cache file; nil once done
	missing int64                   // pages not in it
	loading map[int64]chan struct{} // pages being fetched: closed when done
	done    bool                    // whole, verified: the file is <sha>.done
}

// has reports whether page pg is in the cache file.
func (ps *pieceState) has(pg int64) bool {
	return ps.done || ps.have[pg>>6]&(1<<(pg&63)) != 0
}

// mark records page pg as in the cache file.
func (ps *pieceState) mark(pg int64) {
	if !ps.has(pg) {
		ps.have[pg>>6] |= 1 << (pg & 63)
		ps.missing--
	}
}

func newFetcher(b bucket.Bucket, dir string, pieces map[meta.VersionID][]Piece) (*fetcher, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("chunk cache %s: %w", dir, err)
	}
	return &fetcher{b: b, dir: dir, pieces: pieces, states: map[string]*pieceState{}, slots: make(chan struct{}, maxFetches)}, nil
}

// location is where a replica records version id's pack.
func location(id meta.VersionID, packBytes int64) storage.Location {
	return storage.Location{{Start: int64(id) << 32, Len: (packBytes + blockSize - 1) / blockSize}}
}

func (f *fetcher) BlockSize() int { return blockSize }

func (f *fetcher) ReadAt(loc storage.Location, p []byte, off int64) error {
	return f.readAt(loc, p, off, false)
}

// ReadAtSparse reads like ReadAt but fetches only the pages p covers, and
// nothing ahead: a precision view reads a chunk's high records and skips
// the rest, so the blocks around them would be fetched for nothing.
func (f *fetcher) ReadAtSparse(loc storage.Location, p []byte, off int64) error {
	return f.readAt(loc, p, off, true)
}

func (f *fetcher) readAt(loc storage.Location, p []byte, off int64, sparse bool) error {
	if len(loc) != 1 {
		return fmt.Errorf("replica location %v: %w", loc, storage.ErrShortLocation)
	}
	id := meta.VersionID(loc[0].Start >> 32)
	f.mu.Lock()
	pieces := f.pieces[id]
	f.mu.Unlock()
	end := off + int64(len(p))
	if len(pieces) == 0 || off < 0 || end > pieces[len(pieces)-1].Offset+pieces[len(pieces)-1].Size {
		return fmt.Errorf("version %d pack [%d,%d): %w", id, off, end, storage.ErrShortLocation)
	}
	i := sort.Search(len(pieces), func(i int) bool { return pieces[i].Offset+pieces[i].Size > off })
	for ; len(p) > 0; i++ {
		pc := pieces[i]
		in := off - pc.Offset
		n := min(int64(len(p)), pc.Size-in)
		if err := f.readPiece(pc, p[:n], in, sparse); err != nil {
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
		n := (pc.Size + blockSize - 1) / blockSize
		ps = &pieceState{pages: n, missing: n, loading: map[int64]chan struct{}{}}
		if _, err := os.Stat(f.donePath(pc)); err == nil {
			ps.done = true
		} else {
			ps.have = make([]uint64, (n+63)/64)
		}
		f.states[pc.Key] = ps
	}
	return ps
}

func (f *fetcher) partPath(pc Piece) string { return filepath.Join(f.dir, pc.SHA256+".part") }
func (f *fetcher) donePath(pc Piece) string { return filepath.Join(f.dir, pc.SHA256+".done") }

// readPiece fills p from piece pc at offset off, fetching what the cache
// lacks: the fetch blocks p touches, or only its pages if sparse. A read
// that follows the previous one fetches the blocks after it too, in
// parallel, while the reader decodes.
func (f *fetcher) readPiece(pc Piece, p []byte, off int64, sparse bool) error {
	ps := f.state(pc)
	first, last := off/blockSize, (off+int64(len(p))-1)/blockSize
	if !sparse {
		first -= first % pagesPerBlock
		last = min(last-last%pagesPerBlock+pagesPerBlock, ps.pages) - 1
	}
	ps.mu.Lock()
	sequential := !sparse && !ps.done && (first == 0 || ps.has(first-1))
	ps.mu.Unlock()
	if err := f.ensure(pc, ps, first, last); err != nil {
		return err
	}
	if sequential {
		f.ahead(pc, ps, last/pagesPerBlock+1)
	}
	for attempt := 0; ; attempt++ {
		ps.mu.Lock()
		path := f.partPath(pc)
		if ps.done {
			path = f.donePath(pc)
		}
		ps.mu.Unlock()
		file, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) && attempt == 0 {
			continue // sealed meanwhile
		}
		if err != nil {
			return fmt.Errorf("chunk cache: %w", err)
		}
		_, err = file.ReadAt(p, off)
		file.Close()
		if err != nil {
			return fmt.Errorf("chunk cache %s: %w", path, err)
		}
		return nil
	}
}

// aheadBlocks is how far past a sequential read the fetcher reads, and
// maxFetches how many ranged reads it has in flight at most.
const (
	aheadBlocks = 8
	maxFetches  = 8
)

// ahead fetches the pages of blocks from..from+aheadBlocks of pc that are
// neither cached nor being fetched, each block with ranged reads of its
// own.
func (f *fetcher) ahead(pc Piece, ps *pieceState, from int64) {
	pages := ps.pages
	ps.mu.Lock()
	var todo []int64
	for b := from; b < from+aheadBlocks && b*pagesPerBlock < pages; b++ {
		for pg := b * pagesPerBlock; pg < min((b+1)*pagesPerBlock, pages); pg++ {
			if !ps.has(pg) && ps.loading[pg] == nil {
				todo = append(todo, b)
				break
			}
		}
	}
	ps.mu.Unlock()
	for _, b := range todo {
		select {
		case f.slots <- struct{}{}:
		default:
			return // enough in flight: the reader catches up first
		}
		go func() {
			defer func() { <-f.slots }()
			if err := f.ensure(pc, ps, b*pagesPerBlock, min((b+1)*pagesPerBlock, pages)-1); err != nil {
				logrus.Debugf("remote %s: read ahead: %v", f.b, err)
			}
		}()
	}
}

// ensure makes pages [first, last] of pc present in its cache file: each
// run of missing pages no one fetches is fetched with one ranged read;
// pages another request fetches are waited for.
func (f *fetcher) ensure(pc Piece, ps *pieceState, first, last int64) error {
	for {
		ps.mu.Lock()
		if ps.done {
			ps.mu.Unlock()
			return nil
		}
		var wait chan struct{}
		lo, hi := int64(-1), int64(-1)
		for b := first; b <= last; b++ {
			switch {
			case ps.has(b):
			case ps.loading[b] != nil:
				if wait == nil {
					wait = ps.loading[b]
				}
			case lo < 0:
				lo, hi = b, b
			case hi == b-1:
				hi = b
			}
		}
		var mine chan struct{}
		if lo >= 0 {
			mine = make(chan struct{})
			for b := lo; b <= hi; b++ {
				ps.loading[b] = mine
			}
		}
		ps.mu.Unlock()
		switch {
		case mine != nil:
			if err := f.fetch(pc, ps, lo, hi, mine); err != nil {
				return err
			}
		case wait != nil:
			<-wait // then look again: a failed fetch is retried here
		default:
			return nil
		}
	}
}

// fetch reads pages [lo, hi] of a piece from the bucket into its cache
// file, retrying a few times on failure, then marks them present (and
// seals the piece once whole) and wakes who waits on done.
func (f *fetcher) fetch(pc Piece, ps *pieceState, lo, hi int64, done chan struct{}) error {
	err := f.fetchRange(pc, lo, hi)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for b := lo; b <= hi; b++ {
		delete(ps.loading, b)
		if err == nil {
			ps.mark(b)
		}
	}
	close(done)
	if err != nil {
		return err
	}
	if ps.missing == 0 && !ps.done {
		return f.seal(pc, ps)
	}
	return nil
}

func (f *fetcher) fetchRange(pc Piece, lo, hi int64) error {
	start := lo * blockSize
	end := min(pc.Size, (hi+1)*blockSize)
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
	f.fetched.Add(end - start)
	f.gets.Add(1)
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
	return nil
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
	ps.done, ps.have = true, nil
	return nil
}

package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/meta"
)

// uploadVersion puts a version's pieces (those not in the bucket yet) and
// then its manifest; it returns what was sent beyond what was there.
func (u *Uploader) uploadVersion(ctx context.Context, v *meta.Version) (uploadedRec, int64, error) {
	m := Manifest{Format: formatVersion, Version: *v}
	m.Version.Pack = nil
	var err error
	if m.Segments, m.Chunks, err = u.store.VersionRecords(v.ID); err != nil {
		return uploadedRec{}, 0, fmt.Errorf("records: %w", err)
	}
	pack := packReader{store: u.store, loc: v.Pack}
	rec := uploadedRec{Logical: v.Size}
	count := int((v.PackBytes + u.o.PieceSize - 1) / u.o.PieceSize)
	m.Pieces = make([]Piece, count)
	sizes := make([]int64, count) // bytes each piece sent (0: it was there)
	errs := make([]error, count)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A few pieces in flight: a single PUT stream rarely fills a link. A
	// rate cap is one stream's.
	workers := min(count, 4)
	if u.o.BytesPerSecond > 0 {
		workers = min(count, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for i := range next {
				off := int64(i) * u.o.PieceSize
				n := min(u.o.PieceSize, v.PackBytes-off)
				m.Pieces[i], sizes[i], errs[i] = u.uploadPiece(ctx, pack, off, n, buf)
				if errs[i] != nil {
					cancel()
				}
			}
		}()
	}
	for i := 0; i < count && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return uploadedRec{}, 0, err // the cause, not a worker it stopped
		}
	}
	var sent int64
	for i := range count {
		if errs[i] != nil {
			return uploadedRec{}, 0, errs[i]
		}
		if ctx.Err() != nil && m.Pieces[i].Key == "" {
			return uploadedRec{}, 0, ctx.Err()
		}
		sent += sizes[i]
		rec.Pieces = append(rec.Pieces, m.Pieces[i].Key)
	}
	b, key, err := encodeManifest(&m)
	if err != nil {
		return uploadedRec{}, 0, err
	}
	if err := u.put(ctx, key, b); err != nil {
		return uploadedRec{}, 0, err
	}
	rec.Manifest = key
	return rec, sent + int64(len(b)), nil
}

// put writes a small object, retrying.
func (u *Uploader) put(ctx context.Context, key string, b []byte) error {
	return u.retry(ctx, "put "+key, func() error {
		return u.bucket.Put(ctx, key, bytes.NewReader(b), int64(len(b)), sha(b))
	})
}

// uploadPiece puts pack bytes [off, off+n) under their SHA-256 unless the
// bucket has them already; it returns the piece and the bytes it sent.
func (u *Uploader) uploadPiece(ctx context.Context, pack packReader, off, n int64, buf []byte) (Piece, int64, error) {
	sr := io.NewSectionReader(pack, off, n)
	h := sha256.New()
	if _, err := io.CopyBuffer(h, sr, buf); err != nil {
		return Piece{}, 0, fmt.Errorf("read pack [%d,+%d): %w", off, n, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	p := Piece{Key: piecesDir + sum, Offset: off, Size: n, SHA256: sum}
	var there bool
	err := u.retry(ctx, "look for "+p.Key, func() error {
		var err error
		there, err = u.bucket.Exists(ctx, p.Key)
		return err
	})
	if err != nil || there {
		return p, 0, err
	}
	err = u.retry(ctx, "put "+p.Key, func() error {
		if _, err := sr.Seek(0, io.SeekStart); err != nil {
			return err
		}
		body := &localReader{r: sr}
		err := u.bucket.Put(ctx, p.Key, u.throttle(ctx, body), n, sum)
		if body.err != nil {
			// The store failed, not the network: no retry helps.
			return permanent{fmt.Errorf("read pack [%d,+%d): %w", off, n, body.err)}
		}
		return err
	})
	return p, n, err
}

// packReader reads a version's pack from the store (io.ReaderAt).
type packReader struct {
	store *chain.Store
	loc   []meta.Extent
}

func (p packReader) ReadAt(b []byte, off int64) (int, error) {
	if err := p.store.ReadPack(p.loc, b, off); err != nil {
		return 0, err
	}
	return len(b), nil
}

// localReader remembers a read error of the store's pack, which a failed
// Put would otherwise report as its own.
type localReader struct {
	r   io.ReadSeeker
	err error
}

func (l *localReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

func (l *localReader) Seek(off int64, whence int) (int64, error) { return l.r.Seek(off, whence) }

package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/meta"
)

// uploadVersion puts a version's pieces (those not in the bucket yet) and
// then its manifest; it returns what was sent beyond what was there.
func (u *Uploader) uploadVersion(ctx context.Context, v *meta.Version) (uploadedRec, int64, error) {
	m := Manifest{Format: formatVersion, Version: *v}
	m.Version.Pack = nil
	err := u.store.DB().View(func(tx *meta.Tx) error {
		var err error
		if m.Segments, err = tx.Segments(v.ID); err != nil {
			return err
		}
		return tx.ForEachChunk(v.ID, func(c *meta.Chunk) error { m.Chunks = append(m.Chunks, *c); return nil })
	})
	if err != nil {
		return uploadedRec{}, 0, fmt.Errorf("records: %w", err)
	}
	pack := packReader{store: u.store, loc: v.Pack}
	var sent int64
	rec := uploadedRec{Logical: v.Size}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < v.PackBytes; off += u.o.PieceSize {
		n := min(u.o.PieceSize, v.PackBytes-off)
		sr := io.NewSectionReader(pack, off, n)
		h := sha256.New()
		if _, err := io.CopyBuffer(h, sr, buf); err != nil {
			return uploadedRec{}, 0, fmt.Errorf("read pack [%d,+%d): %w", off, n, err)
		}
		sum := hex.EncodeToString(h.Sum(nil))
		p := Piece{Key: piecesDir + sum, Offset: off, Size: n, SHA256: sum}
		var there bool
		err := u.retry(ctx, "look for "+p.Key, func() error {
			var err error
			there, err = u.bucket.Exists(ctx, p.Key)
			return err
		})
		if err != nil {
			return uploadedRec{}, 0, err
		}
		if !there {
			err := u.retry(ctx, "put "+p.Key, func() error {
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
			if err != nil {
				return uploadedRec{}, 0, err
			}
			sent += n
		}
		m.Pieces = append(m.Pieces, p)
		rec.Pieces = append(rec.Pieces, p.Key)
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

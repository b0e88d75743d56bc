package remote

import (
	"context"
	"fmt"
	"time"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// collectGarbage deletes what no kept root needs: roots older than the
// newest KeepRoots, then the manifests and pieces of versions none of the
// kept roots names (a piece another kept version shares stays). The state
// forgets an object only once it is deleted, so a crash in between deletes
// it again next time.
func (u *Uploader) collectGarbage(ctx context.Context, done map[meta.VersionID]uploadedRec) error {
	seqs, lists, at, err := u.st.roots()
	if err != nil {
		return err
	}
	if len(seqs) == 0 {
		return nil
	}
	first := max(0, len(seqs)-u.o.KeepRoots)
	// A root replaced less than KeepFor ago stays, with what it names:
	// a reader following the run may still have its files open.
	for first > 0 && time.Since(time.Unix(0, at[first])) < u.o.KeepFor {
		first--
	}
	keepVersion := map[meta.VersionID]bool{}
	for _, l := range lists[first:] {
		for _, id := range l {
			keepVersion[id] = true
		}
	}
	keepKey := map[string]bool{}
	for id, rec := range done {
		if keepVersion[id] {
			keepKey[rec.Manifest] = true
			for _, k := range rec.Pieces {
				keepKey[k] = true
			}
		}
	}
	for _, seq := range seqs[:first] {
		if err := u.retry(ctx, "delete "+rootKey(seq), func() error { return u.bucket.Delete(ctx, rootKey(seq)) }); err != nil {
			return err
		}
		if err := u.st.dropRoot(seq); err != nil {
			return err
		}
	}
	dropped := 0
	for id, rec := range done {
		if keepVersion[id] {
			continue
		}
		keys := append([]string{rec.Manifest}, rec.Pieces...)
		for _, k := range keys {
			if keepKey[k] || k == "" {
				continue
			}
			keepKey[k] = true // deleted once, even if two versions named it
			if err := u.retry(ctx, "delete "+k, func() error { return u.bucket.Delete(ctx, k) }); err != nil {
				return err
			}
		}
		if err := u.st.dropUploaded(id); err != nil {
			return fmt.Errorf("forget version %d: %w", id, err)
		}
		delete(done, id)
		dropped++
	}
	if dropped > 0 {
		logrus.Infof("remote %s: deleted the objects of %d versions no kept root needs", u.bucket, dropped)
	}
	return nil
}

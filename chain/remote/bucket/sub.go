package bucket

import (
	"context"
	"io"
	"strings"
)

// Sub is the part of b under prefix dir (which ends with "/"): keys are
// relative to it, lists name only what it holds. Each writer of a run
// keeps its objects in one, so that its GC can only reach its own.
func Sub(b Bucket, dir string) Bucket {
	if dir == "" {
		return b
	}
	return &sub{b: b, dir: strings.TrimSuffix(dir, "/") + "/"}
}

type sub struct {
	b   Bucket
	dir string
}

func (s *sub) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sha256 string) error {
	return s.b.Put(ctx, s.dir+key, body, size, sha256)
}

func (s *sub) Get(ctx context.Context, key string) ([]byte, error) { return s.b.Get(ctx, s.dir+key) }

func (s *sub) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	return s.b.ReadAt(ctx, s.dir+key, p, off)
}

func (s *sub) Exists(ctx context.Context, key string) (bool, error) {
	return s.b.Exists(ctx, s.dir+key)
}

func (s *sub) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := s.b.List(ctx, s.dir+prefix)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, s.dir)
	}
	return keys, err
}

func (s *sub) Delete(ctx context.Context, key string) error { return s.b.Delete(ctx, s.dir+key) }
func (s *sub) Check(ctx context.Context) error              { return s.b.Check(ctx) }
func (s *sub) String() string                               { return s.b.String() + "/" + strings.TrimSuffix(s.dir, "/") }

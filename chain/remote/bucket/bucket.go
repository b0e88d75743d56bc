// Package bucket is the seam to an object store: a flat namespace of
// immutable objects under one prefix of one bucket, written whole, read
// whole or by byte range, listed and deleted. S3 (any S3-compatible server)
// is one implementation; Memory serves unit tests.
package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotFound is returned (wrapped) for a key that holds no object.
var ErrNotFound = errors.New("no such object")

// ErrDenied is returned (wrapped) when the server refuses the credentials or
// the operation: retrying will not help until someone changes them.
var ErrDenied = errors.New("access denied")

// Bucket keeps objects under a prefix. Keys are relative to the prefix.
// Safe for concurrent use.
type Bucket interface {
	// Put stores body (size bytes) as key, replacing nothing visible until
	// it is complete: a Put that fails or is interrupted leaves no object.
	// sha256 (hex), if not empty, is the body's SHA-256: the server checks
	// the body against it (S3 signs it), and the body is read only once.
	Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sha256 string) error
	// Get returns a whole (small) object.
	Get(ctx context.Context, key string) ([]byte, error)
	// ReadAt fills p with the object's bytes from offset off (a ranged read).
	ReadAt(ctx context.Context, key string, p []byte, off int64) error
	// Exists reports whether key holds an object.
	Exists(ctx context.Context, key string) (bool, error)
	// List returns the keys that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Check verifies that the bucket exists and the credentials may list it.
	Check(ctx context.Context) error
	// String names the bucket and prefix (s3://bucket/prefix).
	String() string
}

// URL is a parsed s3://BUCKET/PREFIX.
type URL struct {
	Bucket string
	Prefix string // without leading or trailing slash; may be empty
}

// ParseURL parses s3://BUCKET[/PREFIX].
func ParseURL(s string) (URL, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return URL{}, fmt.Errorf("remote %q: want s3://BUCKET/PREFIX", s)
	}
	b, p, _ := strings.Cut(rest, "/")
	if b == "" {
		return URL{}, fmt.Errorf("remote %q: no bucket name", s)
	}
	return URL{Bucket: b, Prefix: strings.Trim(p, "/")}, nil
}

func (u URL) String() string {
	if u.Prefix == "" {
		return "s3://" + u.Bucket
	}
	return "s3://" + u.Bucket + "/" + u.Prefix
}

// key is the full object key of k under the prefix.
func (u URL) key(k string) string {
	if u.Prefix == "" {
		return k
	}
	return u.Prefix + "/" + k
}

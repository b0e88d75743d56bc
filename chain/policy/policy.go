// Package policy decides how new versions are coded: the codec, which
// earlier version a new one deltas against (the scheme and when to start a
// new baseline), how files are cut into chunks, and which files form a
// series (family). It is pure: the store asks, policy answers.
package policy

import (
	"fmt"
	"strconv"

	"github.com/ckptfs/ckptfs/encode"
)

// Scheme says which earlier version a new delta is taken against.
type Scheme uint8

const (
	// Progressive deltas each version against the family's previous one:
	// the smallest deltas, but restoring version k decodes the whole run
	// since its baseline (the paper's Fig. 6a).
	Progressive Scheme = iota
	// ChainScheme deltas every version against the family's baseline:
	// restores decode two versions at most, deltas grow with distance
	// (Fig. 6b).
	ChainScheme
)

func (s Scheme) String() string {
	if s == ChainScheme {
		return "chain"
	}
	return "progressive"
}

// ParseScheme is the inverse of Scheme.String.
func ParseScheme(s string) (Scheme, error) {
	switch s {
	case "progressive":
		return Progressive, nil
	case "chain":
		return ChainScheme, nil
	}
	return 0, fmt.Errorf("unknown scheme %q (want progressive or chain)", s)
}

// SnapDisAuto asks the store to choose when to start a new baseline.
const SnapDisAuto = 0

// ParseSnapDis reads a --snap-dis value: a positive count or "auto".
func ParseSnapDis(s string) (int, error) {
	if s == "auto" {
		return SnapDisAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("snap-dis %q: want a positive number or auto", s)
	}
	return n, nil
}

// FormatSnapDis is the inverse of ParseSnapDis.
func FormatSnapDis(n int) string {
	if n == SnapDisAuto {
		return "auto"
	}
	return strconv.Itoa(n)
}

// Policy is how new versions are coded. It may change between mounts; it
// applies to versions written afterwards.
type Policy struct {
	Codec   encode.Codec // tensor codec; raw ranges always use zstd
	Scheme  Scheme
	SnapDis int // versions per baseline group (1 = every version a baseline); SnapDisAuto
	// MaxDepth bounds the deltas between any version and its baseline under
	// SnapDisAuto: reading a chunk decodes at most MaxDepth+1 chunks, and
	// hidden-version storage grows with it.
	MaxDepth int
}

// DefaultMaxDepth bounds a cold read to 4 decodes per chunk. Measured on
// the training series (docs/READS.md): depths 4 and 5 saved no write volume
// on fp32+Adam and 1.4 and 2.8 points of the plain volume on SGD and bf16,
// and read 21% and 51% slower than depth 3. Re-measured with the scaled
// codec (docs/CODECS.md): depth 5 saves 1.3-3.2 points, depth 8 no more;
// the restore of the latest checkpoint, a user's first need, keeps 3.
const DefaultMaxDepth = 3

// Default is what `ckptfs mount` uses without flags.
func Default() Policy {
	return Policy{Codec: encode.DefaultCodec, Scheme: Progressive, SnapDis: SnapDisAuto, MaxDepth: DefaultMaxDepth}
}

// Validate refuses policies the store cannot follow.
func (p Policy) Validate() error {
	if p.SnapDis < 0 {
		return fmt.Errorf("snap-dis %d: must be positive or auto", p.SnapDis)
	}
	if p.SnapDis == SnapDisAuto && p.MaxDepth < 1 {
		return fmt.Errorf("max depth %d: must be at least 1", p.MaxDepth)
	}
	if p.Scheme > ChainScheme {
		return fmt.Errorf("unknown scheme %d", p.Scheme)
	}
	return nil
}

// Layout fixes how files are cut into chunks. It is part of the on-disk
// format: chunks of two versions line up only if both used the same layout.
type Layout struct {
	ChunkElems int `json:"chunk_elems"` // elements per tensor chunk
	RawChunk   int `json:"raw_chunk"`   // bytes per raw chunk
}

// DefaultLayout cuts tensors into 64 Ki-element chunks (256 KiB of float32).
func DefaultLayout() Layout { return Layout{ChunkElems: 64 << 10, RawChunk: 256 << 10} }

// ChunkBytes is the size of a chunk of a tensor of type dt, or of raw bytes.
func (l Layout) ChunkBytes(tensor bool, dt encode.DType) int {
	if !tensor {
		return l.RawChunk
	}
	return l.ChunkElems * dt.Width()
}

// RawCodec is the codec for non-tensor bytes, as the tensor codec's method
// would code them: the paper's "complete" stores everything, its gzip
// variants gzip everything, its RLE variants compress floats only; planes
// uses zstd.
func (p Policy) RawCodec() encode.Codec {
	switch p.Codec {
	case encode.Stored, encode.DynRLE, encode.RLE4:
		return encode.Stored
	case encode.Gzip, encode.RLE4Gzip:
		return encode.Gzip
	default:
		return encode.Zstd
	}
}

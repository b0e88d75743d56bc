package policy

import "github.com/ckptfs/ckptfs/encode"

// The codecs a policy names, as the store's API calls them (package encode
// implements them).
type Codec = encode.Codec

// The codecs (docs/CODECS.md).
const (
	Stored   = encode.Stored
	Zstd     = encode.Zstd
	Planes   = encode.Planes
	DynRLE   = encode.DynRLE
	RLE4     = encode.RLE4
	Gzip     = encode.Gzip
	RLE4Gzip = encode.RLE4Gzip
)

// ParseCodec reads a codec name (the --codec flag).
func ParseCodec(s string) (Codec, error) { return encode.ParseCodec(s) }

// Codecs lists every codec, in id order.
func Codecs() []Codec { return encode.Codecs() }

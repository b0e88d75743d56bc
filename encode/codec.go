package encode

import "fmt"

// Codec identifies how a chunk's payload is coded. The numeric ids are part
// of the on-disk format (docs/CODECS.md): never renumber, only append.
type Codec uint8

const (
	// Stored keeps the plain bytes (the paper's "complete" snapshot). It
	// never depends on a reference, even when given one.
	Stored Codec = 0
	// Zstd is zstd of the plain bytes, or of the XOR delta. For raw,
	// non-tensor ranges.
	Zstd Codec = 1
	// Planes is the default: XOR or order-preserving SUB delta, byte-plane
	// split, each plane block entropy coded with the cheapest coder.
	Planes Codec = 2
	// DynRLE is the paper's method: XOR delta, heading-zero count coded with
	// a per-chunk width (Algorithm 1); baselines with Huffman-coded exponents.
	DynRLE Codec = 3
	// RLE4 is DynRLE with the heading-zero width fixed at 4 bits.
	RLE4 Codec = 4
	// Gzip is gzip of the plain bytes, or (the paper's "GZIP+delta") of the
	// XOR delta.
	Gzip Codec = 5
	// RLE4Gzip is RLE4's output, gzipped.
	RLE4Gzip Codec = 6
	// Scaled is planes against the reference scaled by one float32 factor
	// per chunk, when that predicts the chunk better (Adam's decaying
	// second moment); otherwise planes itself (scaled.go).
	Scaled Codec = 7
	// Split16 is planes over the high and low 16 bits of float32 values
	// apart, so that the high halves rebuild alone: what a view at
	// bfloat16 precision reads (split.go). Opt-in: it stores 2-27% more
	// than Scaled per tensor role.
	Split16 Codec = 8

	numCodecs = 9
)

var codecNames = [numCodecs]string{
	Stored:   "stored",
	Zstd:     "zstd",
	Planes:   "planes",
	DynRLE:   "dynrle",
	RLE4:     "rle4",
	Gzip:     "gzip",
	RLE4Gzip: "rle4gzip",
	Scaled:   "scaled",
	Split16:  "split16",
}

// DefaultCodec is what the store uses for tensor chunks unless told
// otherwise: scaled, which writes 5-10% fewer bytes than planes on Adam and
// bf16 deltas at a sixth less encode speed, now that a save no longer waits
// for its encoding (docs/CODECS.md, "The default since issue 27").
const DefaultCodec = Scaled

func (c Codec) String() string {
	if c.Valid() {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// Valid reports whether c is a defined codec.
func (c Codec) Valid() bool { return c < numCodecs }

// ParseCodec is the inverse of Codec.String.
func ParseCodec(s string) (Codec, error) {
	for c, name := range codecNames {
		if name == s {
			return Codec(c), nil
		}
	}
	return Stored, fmt.Errorf("parse codec %q: %w (known: %v)", s, ErrUnsupported, Codecs())
}

// Codecs lists every codec, in id order.
func Codecs() []Codec {
	out := make([]Codec, numCodecs)
	for i := range out {
		out[i] = Codec(i)
	}
	return out
}

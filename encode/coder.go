package encode

import (
	stdgzip "compress/gzip"
	"fmt"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Coder encodes and decodes chunks, keeping the scratch state of the entropy
// coders between calls so a stream of chunks allocates little. A Coder is not
// safe for concurrent use; use one per goroutine (Pipeline does), or the
// package-level Encode/Decode, which draw Coders from a pool.
type Coder struct {
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	gzw  *stdgzip.Writer // the standard library's: zlib's default level, as gzip -c
	gzr  *gzip.Reader
	tmp  []byte // gzip inner streams, XOR deltas
	pl   planeScratch
	// scaled is the scaled reference of a Scaled chunk.
	scaled []byte
	// largest is the largest chunk that Encode and Decode gave this
	// Coder: its scratch grew for it.
	largest int
}

// NewCoder returns a Coder with no scratch allocated yet.
func NewCoder() *Coder { return &Coder{} }

// Idle Coders of Encode and Decode wait in two places. A sync.Pool is
// emptied by every garbage collection, and a new Coder grows its scratch
// (about 1 MiB for a chunk of 256 KiB) all over again: 16 encode workers
// under a tight heap limit allocated 3.7 GB of scratch during 24 saves of
// 100 MB, and the collections that followed took a third of the daemon's
// CPU. So up to keptCoders idle Coders are kept across collections, if
// their scratch was grown for chunks of at most keptPlainMax bytes (a
// Coder that once handled a huge chunk would hold its scratch for good);
// the others go to the pool.
const (
	keptCoders   = 8
	keptPlainMax = 1 << 20
)

var (
	keptIdle  = make(chan *Coder, keptCoders)
	coderPool = sync.Pool{New: func() any { return NewCoder() }}
)

func getCoder() *Coder {
	select {
	case cd := <-keptIdle:
		return cd
	default:
		return coderPool.Get().(*Coder)
	}
}

func putCoder(cd *Coder) {
	if cd.largest <= keptPlainMax {
		select {
		case keptIdle <- cd:
			return
		default:
		}
	}
	coderPool.Put(cd)
}

// Encode appends the encoded chunk to dst (see Coder.Encode).
func Encode(dst []byte, c Codec, dt DType, plain, ref []byte) ([]byte, error) {
	cd := getCoder()
	defer putCoder(cd)
	cd.largest = max(cd.largest, len(plain))
	return cd.Encode(dst, c, dt, plain, ref)
}

// Decode appends the plain bytes of enc to dst (see Coder.Decode).
func Decode(dst, enc, ref []byte) ([]byte, error) {
	return decodePooled(dst, enc, ref, true)
}

// DecodeUnverified is Decode without the check of the plain bytes against
// the chunk's checksum: for a chunk that only serves as the reference of
// another whose own check follows. A reference decoded wrong makes that
// chunk's bytes wrong, and its check fails (all but 2^-32 of the time);
// the malformed payloads Decode refuses are refused here too.
func DecodeUnverified(dst, enc, ref []byte) ([]byte, error) {
	return decodePooled(dst, enc, ref, false)
}

func decodePooled(dst, enc, ref []byte, verify bool) ([]byte, error) {
	cd := getCoder()
	defer putCoder(cd)
	if h, err := parseHeader(enc); err == nil {
		cd.largest = max(cd.largest, h.PlainLen)
	}
	return cd.decode(dst, enc, ref, verify)
}

// Encode appends to dst one self-describing chunk holding plain, coded with
// codec c for elements of type dt. ref == nil codes a baseline; otherwise ref
// is the same chunk of the reference version and must have len(plain) bytes.
// Any bytes are accepted whatever dt says: dt only steers the modelling.
// The chunk's header says whether it came out as a delta (Inspect).
func (cd *Coder) Encode(dst []byte, c Codec, dt DType, plain, ref []byte) ([]byte, error) {
	if !c.Valid() {
		return dst, fmt.Errorf("encode: %w: codec %d", ErrUnsupported, c)
	}
	if !dt.Valid() {
		return dst, fmt.Errorf("encode: %w: dtype %d", ErrUnsupported, dt)
	}
	if len(plain) > MaxPlain {
		return dst, fmt.Errorf("encode: %w: %d bytes (max %d)", ErrTooLarge, len(plain), MaxPlain)
	}
	if ref != nil && len(ref) != len(plain) {
		return dst, fmt.Errorf("encode: %w: reference has %d bytes, chunk %d", ErrRefMismatch, len(ref), len(plain))
	}
	h := Header{Codec: c, DType: dt, PlainLen: len(plain), CRC: checksum(plain)}
	start := len(dst)
	out := append(dst, make([]byte, headerLen)...)
	var err error
	if len(plain) > 0 {
		out, h.Delta, err = cd.encodePayload(out, c, dt, plain, ref)
		if err != nil {
			return dst, fmt.Errorf("encode %s %s: %w", c, dt, err)
		}
	}
	payloadLen := len(out) - start - headerLen
	if uint64(payloadLen) > math.MaxUint32 {
		return dst, fmt.Errorf("encode %s %s: %w: payload of %d bytes", c, dt, ErrTooLarge, payloadLen)
	}
	putHeader(out[start:], h, payloadLen)
	return out, nil
}

func (cd *Coder) encodePayload(dst []byte, c Codec, dt DType, plain, ref []byte) ([]byte, bool, error) {
	delta := ref != nil
	switch c {
	case Stored:
		return append(dst, plain...), false, nil
	case Planes:
		return cd.encodePlanes(dst, dt, plain, ref)
	case Scaled:
		return cd.encodeScaled(dst, dt, plain, ref)
	case Split16:
		return cd.encodeSplit(dst, dt, plain, ref)
	case DynRLE, RLE4:
		if delta {
			return encodeRLEDelta(dst, dt, plain, ref, c == RLE4), true, nil
		}
		return encodeHuffBaseline(dst, dt, plain), false, nil
	case RLE4Gzip:
		if delta {
			cd.tmp = encodeRLEDelta(cd.tmp[:0], dt, plain, ref, true)
		} else {
			cd.tmp = encodeHuffBaseline(cd.tmp[:0], dt, plain)
		}
		out, err := cd.gzipTo(dst, cd.tmp)
		return out, delta, err
	case Zstd, Gzip:
		src := plain
		if delta {
			cd.tmp = grow(cd.tmp, len(plain))
			xorInto(cd.tmp, plain, ref)
			src = cd.tmp
		}
		if c == Gzip {
			out, err := cd.gzipTo(dst, src)
			return out, delta, err
		}
		enc, err := cd.zstdEncoder()
		if err != nil {
			return dst, false, err
		}
		return enc.EncodeAll(src, dst), delta, nil
	}
	return dst, false, fmt.Errorf("%w: codec %d", ErrUnsupported, c)
}

// Decode appends the plain bytes of the chunk enc to dst. enc must be exactly
// one chunk (Inspect tells its length). A delta chunk needs ref, the plain
// bytes of its reference, of the chunk's plain length (else ErrRefMismatch);
// a baseline chunk ignores ref. Errors wrap ErrCorrupt, ErrChecksum,
// ErrRefMismatch or ErrUnsupported; on error dst comes back unextended.
func (cd *Coder) Decode(dst, enc, ref []byte) ([]byte, error) {
	return cd.decode(dst, enc, ref, true)
}

func (cd *Coder) decode(dst, enc, ref []byte, verify bool) ([]byte, error) {
	h, err := parseHeader(enc)
	if err != nil {
		return dst, fmt.Errorf("decode chunk: %w", err)
	}
	if len(enc) != h.EncodedLen {
		return dst, fmt.Errorf("decode chunk: %w: %d bytes after the payload", ErrCorrupt, len(enc)-h.EncodedLen)
	}
	if h.Delta && (ref == nil || len(ref) != h.PlainLen) {
		return dst, fmt.Errorf("decode %s chunk: %w: delta of %d bytes, reference of %d (nil: %t)",
			h.Codec, ErrRefMismatch, h.PlainLen, len(ref), ref == nil)
	}
	if !h.Delta {
		ref = nil
	}
	payload := enc[h.HeaderLen:]
	start := len(dst)
	dst = grow(dst, start+h.PlainLen)
	out := dst[start:]
	if h.PlainLen == 0 {
		if len(payload) != 0 {
			return dst[:start], fmt.Errorf("decode chunk: %w: payload for an empty chunk", ErrCorrupt)
		}
	} else if err := cd.decodePayload(out, h, payload, ref); err != nil {
		return dst[:start], fmt.Errorf("decode %s chunk: %w", h.Codec, err)
	}
	if !verify {
		return dst, nil
	}
	if got := checksum(out); got != h.CRC {
		return dst[:start], fmt.Errorf("decode %s chunk: %w: crc %08x, want %08x", h.Codec, ErrChecksum, got, h.CRC)
	}
	return dst, nil
}

func (cd *Coder) decodePayload(out []byte, h Header, payload, ref []byte) error {
	delta := ref != nil
	switch h.Codec {
	case Stored:
		if delta || len(payload) != len(out) {
			return fmt.Errorf("%w: stored payload of %d bytes for %d", ErrCorrupt, len(payload), len(out))
		}
		copy(out, payload)
		return nil
	case Planes:
		return cd.decodePlanes(out, h.DType, payload, ref)
	case Scaled:
		return cd.decodeScaled(out, h.DType, payload, ref)
	case Split16:
		return cd.decodeSplit(out, h.DType, payload, ref)
	case DynRLE, RLE4:
		if delta {
			return decodeRLEDelta(out, h.DType, payload, ref, h.Codec == RLE4)
		}
		return decodeHuffBaseline(out, h.DType, payload)
	case RLE4Gzip:
		inner, err := cd.gunzipBounded(payload, rleBound(h.DType, len(out)))
		if err != nil {
			return err
		}
		if delta {
			return decodeRLEDelta(out, h.DType, inner, ref, true)
		}
		return decodeHuffBaseline(out, h.DType, inner)
	case Zstd, Gzip:
		var err error
		if h.Codec == Gzip {
			err = cd.gunzipInto(out, payload)
		} else {
			err = cd.zstdInto(out, payload)
		}
		if err == nil && delta {
			xorInto(out, out, ref)
		}
		return err
	}
	return fmt.Errorf("%w: codec %d", ErrUnsupported, h.Codec)
}

// grow returns b with length n, reusing its array when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, n+n/8)
	copy(nb, b)
	return nb
}

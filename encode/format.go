package encode

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The chunk header (docs/CODECS.md is the authoritative description):
//
//	0     magic        0xC7
//	1     version      1
//	2     codec        Codec id
//	3     flags        bits 0-3 dtype, bit 4 delta, bits 5-7 zero
//	4..   plain length uvarint, <= MaxPlain
//	..    payload len  uvarint
//	..    crc          CRC-32C (Castagnoli) of the plain bytes, little-endian
//	..    payload      codec specific, exactly "payload len" bytes
const (
	chunkMagic    = 0xC7
	formatVersion = 1

	flagDTypeMask = 0x0F
	flagDelta     = 0x10
	flagReserved  = 0xE0

	// maxHeaderLen bounds the header: 4 fixed bytes, two uvarints of at most
	// 5 bytes each, 4 bytes of CRC.
	maxHeaderLen = 4 + 5 + 5 + 4
)

// MaxPlain is the longest plain chunk a chunk header may describe. It caps
// what a corrupt length field can make the decoder allocate.
const MaxPlain = 1 << 30

// maxBaselineRatio bounds plain/payload for chunks that need no reference: no
// encoder here compresses better than 1 byte per 64 KiB plane block (planes'
// constant blocks), zstd's RLE blocks stay near 1:32768, so a baseline header
// claiming more is corrupt and must not make us allocate its plain length.
const maxBaselineRatio = 1 << 17

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is what a chunk says about itself, readable without decoding.
type Header struct {
	Codec Codec
	DType DType
	// Delta is true when the chunk needs its reference to decode. A codec
	// may code a chunk without its reference even when given one (Stored
	// always does, Planes does when the delta does not pay), so the store
	// should record dependencies from this flag, not from what it passed.
	Delta      bool
	PlainLen   int
	HeaderLen  int // bytes before the payload
	EncodedLen int // header plus payload: the whole chunk
	CRC        uint32
}

// appendHeader writes the header of a chunk whose payload will follow.
// The payload length is not known yet, so the caller reserves it with
// reserveHeader and patches it with finishHeader instead; appendHeader is
// used when the payload length is known up front.
func appendHeader(dst []byte, h Header, payloadLen int) []byte {
	flags := byte(h.DType) & flagDTypeMask
	if h.Delta {
		flags |= flagDelta
	}
	dst = append(dst, chunkMagic, formatVersion, byte(h.Codec), flags)
	dst = binary.AppendUvarint(dst, uint64(h.PlainLen))
	dst = binary.AppendUvarint(dst, uint64(payloadLen))
	return binary.LittleEndian.AppendUint32(dst, h.CRC)
}

// Inspect parses the header of an encoded chunk. It checks everything the
// header alone can tell (magic, version, ids, lengths, that the payload is
// all there), but not the payload.
func Inspect(enc []byte) (Header, error) {
	h, err := parseHeader(enc)
	if err != nil {
		return h, fmt.Errorf("inspect chunk: %w", err)
	}
	return h, nil
}

func parseHeader(enc []byte) (Header, error) {
	var h Header
	if len(enc) < 4 {
		return h, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(enc))
	}
	if enc[0] != chunkMagic {
		return h, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, enc[0])
	}
	if enc[1] != formatVersion {
		return h, fmt.Errorf("%w: format version %d", ErrUnsupported, enc[1])
	}
	h.Codec = Codec(enc[2])
	if !h.Codec.Valid() {
		return h, fmt.Errorf("%w: codec id %d", ErrUnsupported, enc[2])
	}
	flags := enc[3]
	if flags&flagReserved != 0 {
		return h, fmt.Errorf("%w: reserved flag bits %#x", ErrCorrupt, flags)
	}
	h.DType = DType(flags & flagDTypeMask)
	if !h.DType.Valid() {
		return h, fmt.Errorf("%w: dtype id %d", ErrUnsupported, h.DType)
	}
	h.Delta = flags&flagDelta != 0
	off := 4
	plain, n := binary.Uvarint(enc[off:])
	if n <= 0 || plain > MaxPlain {
		return h, fmt.Errorf("%w: plain length field", ErrCorrupt)
	}
	off += n
	payload, n := binary.Uvarint(enc[off:])
	if n <= 0 || payload > 2*MaxPlain {
		return h, fmt.Errorf("%w: payload length field", ErrCorrupt)
	}
	off += n
	if len(enc) < off+4 {
		return h, fmt.Errorf("%w: truncated header", ErrCorrupt)
	}
	h.CRC = binary.LittleEndian.Uint32(enc[off:])
	off += 4
	h.PlainLen = int(plain)
	h.HeaderLen = off
	h.EncodedLen = off + int(payload)
	if len(enc) < h.EncodedLen {
		return h, fmt.Errorf("%w: payload truncated (%d of %d bytes)", ErrCorrupt, len(enc)-off, payload)
	}
	if !h.Delta && uint64(h.PlainLen) > (payload+1)*maxBaselineRatio {
		return h, fmt.Errorf("%w: %d plain bytes cannot come from a %d-byte payload", ErrCorrupt, plain, payload)
	}
	return h, nil
}

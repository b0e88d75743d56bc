package encode

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The chunk header, 16 bytes (docs/CODECS.md is the authoritative
// description):
//
//	0     magic        0xC7
//	1     version      3 (2 still decodes)
//	2     codec        Codec id
//	3     flags        bits 0-3 dtype, bit 4 delta, bits 5-7 zero
//	4:8   plain length uint32 LE, <= MaxPlain
//	8:12  payload len  uint32 LE
//	12:16 crc          CRC-32C (Castagnoli) of the plain bytes, LE
//	16:   payload      codec specific, exactly "payload len" bytes
//
// Fixed-size fields let Encode reserve the header, append the payload
// straight after it and fill the lengths in, without moving the payload.
const (
	chunkMagic = 0xC7
	// formatVersion is what Encode writes. Version 3 lets a sparse
	// record's parts be sparse (maxSparseDepth); version 2 chunks, which
	// never hold such a record, decode as they always did.
	formatVersion    = 3
	minFormatVersion = 2
	headerLen        = 16

	flagDTypeMask = 0x0F
	flagDelta     = 0x10
	flagReserved  = 0xE0
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

// putHeader fills the headerLen bytes of b.
func putHeader(b []byte, h Header, payloadLen int) {
	flags := byte(h.DType) & flagDTypeMask
	if h.Delta {
		flags |= flagDelta
	}
	b[0], b[1], b[2], b[3] = chunkMagic, formatVersion, byte(h.Codec), flags
	binary.LittleEndian.PutUint32(b[4:], uint32(h.PlainLen))
	binary.LittleEndian.PutUint32(b[8:], uint32(payloadLen))
	binary.LittleEndian.PutUint32(b[12:], h.CRC)
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

// InspectPrefix is Inspect of a chunk's first bytes (its header at
// least, HighProbeLen covers it): a view fetching part of a chunk reads
// its header from them.
func InspectPrefix(enc []byte) (Header, error) {
	h, err := parseHeaderPrefix(enc)
	if err != nil {
		return h, fmt.Errorf("inspect chunk: %w", err)
	}
	return h, nil
}

func parseHeader(enc []byte) (Header, error) {
	h, err := parseHeaderPrefix(enc)
	if err == nil && len(enc) < h.EncodedLen {
		return h, fmt.Errorf("%w: payload truncated (%d of %d bytes)", ErrCorrupt, len(enc)-headerLen, h.EncodedLen-headerLen)
	}
	return h, err
}

// parseHeaderPrefix is parseHeader of the first bytes of a chunk: all of
// its checks but that the payload is all there.
func parseHeaderPrefix(enc []byte) (Header, error) {
	var h Header
	if len(enc) < headerLen {
		return h, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(enc))
	}
	if enc[0] != chunkMagic {
		return h, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, enc[0])
	}
	if enc[1] < minFormatVersion || enc[1] > formatVersion {
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
	plain := binary.LittleEndian.Uint32(enc[4:])
	payload := binary.LittleEndian.Uint32(enc[8:])
	h.CRC = binary.LittleEndian.Uint32(enc[12:])
	if plain > MaxPlain {
		return h, fmt.Errorf("%w: plain length %d over %d", ErrCorrupt, plain, MaxPlain)
	}
	h.PlainLen = int(plain)
	h.HeaderLen = headerLen
	h.EncodedLen = headerLen + int(payload)
	if !h.Delta && uint64(plain) > (uint64(payload)+1)*maxBaselineRatio {
		return h, fmt.Errorf("%w: %d plain bytes cannot come from a %d-byte payload", ErrCorrupt, plain, payload)
	}
	return h, nil
}

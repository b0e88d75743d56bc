package encode

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The split16 codec: the planes codec's block coder over float32 values cut
// in two halves, so that the high halves (sign, exponent and the 7 top bits
// of the mantissa: the bfloat16 value rounded toward zero) rebuild from the
// high planes alone, of this chunk and of its chain. That is what a
// precision view reads (DecodeHigh16; docs/ARCHIVE.md). It gives up the
// scaled reference and the groups of the default codec, whose high bits
// depend on the reference's low bits. Payload:
//
//	mode     1 byte: s16Planes (a planes payload follows: chunks that are
//	         not float32), s16Base, s16Sub or s16Same
//	highLen  uint32 LE: bytes of the high records
//	highCRC  uint32 LE: CRC-32C of the high halves, n uint16 LE
//	high     2 planes of the n high halves, low byte first, as the planes
//	         codec codes a bfloat16 chunk: a baseline rotates the sign into
//	         bit 0, a delta is the order-preserving SUB of the halves
//	low      2 planes of the low halves: raw in a baseline, the zigzagged
//	         16-bit difference in a delta
//	tail     the len%4 plain bytes after the last element
//
// s16Same (the chunk equals its reference) has no other bytes.
const (
	s16Planes byte = iota
	s16Base
	s16Sub
	s16Same
)

const splitHeaderLen = 9 // mode, highLen, highCRC

func (cd *Coder) encodeSplit(dst []byte, dt DType, plain, ref []byte) ([]byte, bool, error) {
	n := len(plain) / 4
	if dt != Float32 || n == 0 {
		return cd.encodePlanes(append(dst, s16Planes), dt, plain, ref)
	}
	if ref != nil && bytes.Equal(plain, ref) {
		return append(dst, s16Same), true, nil
	}
	ps := &cd.pl
	// halves: the high halves, then the low ones; the reference's after.
	cd.tmp = grow(cd.tmp, 8*n)
	hi, lo, rhi, rlo := cd.tmp[:2*n], cd.tmp[2*n:4*n], cd.tmp[4*n:6*n], cd.tmp[6*n:8*n]
	cutHalves(hi, lo, plain, n)
	mode, pm := s16Base, modeBase
	if ref != nil {
		cutHalves(rhi, rlo, ref, n)
		mode, pm = s16Sub, modeSUB
	}
	start := len(dst)
	dst = append(dst, mode, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(dst[start+5:], checksum(hi))
	if ref == nil {
		rhi, rlo = nil, nil
	}
	ps.buf = grow(ps.buf, 2*n)
	splitAny(ps.buf, hi, rhi, n, 2, pm, 0)
	dst = ps.appendPlanes(dst, ps.buf, n, 2, nil)
	binary.LittleEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-splitHeaderLen))
	splitLow(ps.buf, lo, rlo, n)
	dst = ps.appendPlanes(dst, ps.buf, n, 2, nil)
	return append(dst, plain[4*n:]...), ref != nil, nil
}

// cutHalves writes the high and low 16 bits of n float32 values as uint16
// LE, four values at a time. lo may be nil.
func cutHalves(hi, lo, plain []byte, n int) {
	hi, plain = hi[:2*n], plain[:4*n]
	n4 := n &^ 3
	for i := 0; i < n4; i += 4 {
		a := binary.LittleEndian.Uint64(plain[4*i:])
		b := binary.LittleEndian.Uint64(plain[4*i+8:])
		binary.LittleEndian.PutUint64(hi[2*i:], a>>16&0xffff|a>>48<<16|(b>>16&0xffff)<<32|b>>48<<48)
		if lo != nil {
			binary.LittleEndian.PutUint64(lo[2*i:], a&0xffff|(a>>32&0xffff)<<16|(b&0xffff)<<32|(b>>32&0xffff)<<48)
		}
	}
	for i := n4; i < n; i++ {
		v := binary.LittleEndian.Uint32(plain[4*i:])
		binary.LittleEndian.PutUint16(hi[2*i:], uint16(v>>16))
		if lo != nil {
			binary.LittleEndian.PutUint16(lo[2*i:], uint16(v))
		}
	}
}

// splitLow writes the low halves (or their zigzagged difference from the
// reference's) as two byte planes.
func splitLow(pl, lo, rlo []byte, n int) {
	p0, p1 := pl[:n], pl[n:2*n]
	for i := 0; i < n; i++ {
		v := binary.LittleEndian.Uint16(lo[2*i:])
		if rlo != nil {
			d := int16(v - binary.LittleEndian.Uint16(rlo[2*i:]))
			v = uint16(d<<1 ^ d>>15)
		}
		p0[i], p1[i] = byte(v), byte(v>>8)
	}
}

// lowLanes returns the four low halves at element i (uint16 lanes of a
// uint64) from the low planes p0, p1: raw, or, against the reference's
// low halves rlo (nil for a baseline), their zigzagged differences.
func lowLanes(p0, p1, rlo []byte, i int) uint64 {
	const (
		ones = 0x0001000100010001
		tops = 0x8000800080008000
	)
	lo := spread16(binary.LittleEndian.Uint32(p0[i:])) | spread16(binary.LittleEndian.Uint32(p1[i:]))<<8
	if rlo != nil {
		r := binary.LittleEndian.Uint64(rlo[2*i:])
		d := lo>>1&^tops ^ (lo&ones)*0xffff   // unzigzag per lane
		lo = (r&^tops + d&^tops) ^ (r^d)&tops // lane-wise add mod 2^16
	}
	return lo
}

// lowOne is lowLanes of one element.
func lowOne(p0, p1, rlo []byte, i int) uint16 {
	v := uint16(p0[i]) | uint16(p1[i])<<8
	if rlo != nil {
		d := int16(v>>1) ^ -int16(v&1)
		v = binary.LittleEndian.Uint16(rlo[2*i:]) + uint16(d)
	}
	return v
}

// joinLow writes the n low halves (uint16 LE) into lo from the low planes
// pl, against the reference's low halves rlo (nil for a baseline).
func joinLow(lo, pl, rlo []byte, n int) {
	p0, p1, lo := pl[:n], pl[n:2*n], lo[:2*n]
	if rlo != nil {
		rlo = rlo[:2*n]
	}
	n4 := n &^ 3
	for i := 0; i < n4; i += 4 {
		binary.LittleEndian.PutUint64(lo[2*i:], lowLanes(p0, p1, rlo, i))
	}
	for i := n4; i < n; i++ {
		binary.LittleEndian.PutUint16(lo[2*i:], lowOne(p0, p1, rlo, i))
	}
}

// joinHalves writes n float32 values into out from their high halves (hi,
// uint16 LE) and the low planes pl, against the reference's low halves
// rlo (nil for a baseline): joinLow and the interleave in one pass.
func joinHalves(out, hi, pl, rlo []byte, n int) {
	p0, p1 := pl[:n], pl[n:2*n]
	out, hi = out[:4*n], hi[:2*n]
	if rlo != nil {
		rlo = rlo[:2*n]
	}
	n4 := n &^ 3
	for i := 0; i < n4; i += 4 {
		lo := lowLanes(p0, p1, rlo, i)
		h := binary.LittleEndian.Uint64(hi[2*i:])
		binary.LittleEndian.PutUint64(out[4*i:], lo&0xffff|(h&0xffff)<<16|(lo>>16&0xffff)<<32|(h>>16&0xffff)<<48)
		binary.LittleEndian.PutUint64(out[4*i+8:], lo>>32&0xffff|(h>>32&0xffff)<<16|(lo>>48)<<32|(h>>48)<<48)
	}
	for i := n4; i < n; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(binary.LittleEndian.Uint16(hi[2*i:]))<<16|uint32(lowOne(p0, p1, rlo, i)))
	}
}

// spread16 puts the four bytes of x in the low bytes of four 16-bit lanes.
func spread16(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	return (v | v<<8) & 0x00ff00ff00ff00ff
}

// splitPayload is a parsed split16 payload.
type splitPayload struct {
	mode       byte
	crc        uint32
	high, rest []byte // the high records; the low records and the tail
}

func parseSplit(payload []byte, delta bool) (splitPayload, error) {
	var sp splitPayload
	if len(payload) < 1 {
		return sp, fmt.Errorf("%w: split16 payload empty", ErrCorrupt)
	}
	sp.mode = payload[0]
	switch {
	case sp.mode == s16Same:
		if !delta || len(payload) != 1 {
			return sp, fmt.Errorf("%w: bad unchanged-chunk record", ErrCorrupt)
		}
		return sp, nil
	case sp.mode == s16Planes:
		sp.rest = payload[1:]
		return sp, nil
	case sp.mode != s16Base && sp.mode != s16Sub, (sp.mode == s16Sub) != delta:
		return sp, fmt.Errorf("%w: split16 mode %d (delta chunk: %t)", ErrCorrupt, sp.mode, delta)
	}
	if len(payload) < splitHeaderLen {
		return sp, fmt.Errorf("%w: split16 header truncated", ErrCorrupt)
	}
	hl := binary.LittleEndian.Uint32(payload[1:])
	sp.crc = binary.LittleEndian.Uint32(payload[5:])
	body := payload[splitHeaderLen:]
	if uint64(hl) > uint64(len(body)) {
		return sp, fmt.Errorf("%w: split16 high records of %d bytes, %d left", ErrCorrupt, hl, len(body))
	}
	sp.high, sp.rest = body[:hl], body[hl:]
	return sp, nil
}

// decodeHigh decodes the high halves of a split chunk of n elements into hi
// (2n bytes), against the reference's high halves rhi (nil for a baseline).
func (ps *planeScratch) decodeHigh(hi []byte, sp splitPayload, rhi []byte, n int, zstdInto func(out, src []byte) error) error {
	ps.buf = grow(ps.buf, 2*n)
	left, err := ps.decodePlanesInto(ps.buf, sp.high, n, 2, nil, zstdInto)
	if err != nil {
		return fmt.Errorf("high planes: %w", err)
	}
	if len(left) != 0 {
		return fmt.Errorf("%w: %d bytes after the high planes", ErrCorrupt, len(left))
	}
	pm := modeBase
	if sp.mode == s16Sub {
		pm = modeSUB
	}
	joinAny(hi, ps.buf, rhi, n, 2, pm, 0)
	return nil
}

func (cd *Coder) decodeSplit(out []byte, dt DType, payload, ref []byte) error {
	sp, err := parseSplit(payload, ref != nil)
	if err != nil {
		return err
	}
	switch sp.mode {
	case s16Same:
		copy(out, ref)
		return nil
	case s16Planes:
		return cd.decodePlanes(out, dt, sp.rest, ref)
	}
	if dt != Float32 || len(out) < 4 {
		return fmt.Errorf("%w: split16 halves for a %s chunk of %d bytes", ErrCorrupt, dt, len(out))
	}
	var form []byte
	if ref != nil {
		cd.scaled = grow(cd.scaled, len(ref))
		form = cd.scaled
		SplitForm(form, ref)
	}
	return cd.decodeForm(out, sp, form, false)
}

// decodeForm decodes a split16 float32 payload against its reference's
// split form (nil for a baseline) into out: the plain bytes, or with
// asForm the chunk's own split form.
func (cd *Coder) decodeForm(out []byte, sp splitPayload, refForm []byte, asForm bool) error {
	n := len(out) / 4
	var rhi, rlo []byte
	if refForm != nil {
		rhi, rlo = refForm[:2*n], refForm[2*n:4*n]
	}
	cd.tmp = grow(cd.tmp, 2*n)
	hi := cd.tmp
	if asForm {
		hi = out[:2*n]
	}
	ps := &cd.pl
	if err := ps.decodeHigh(hi, sp, rhi, n, cd.zstdInto); err != nil {
		return err
	}
	ps.buf = grow(ps.buf, 2*n)
	tail, err := ps.decodePlanesInto(ps.buf, sp.rest, n, 2, nil, cd.zstdInto)
	if err != nil {
		return fmt.Errorf("low planes: %w", err)
	}
	if len(tail) != len(out)-4*n {
		return fmt.Errorf("%w: %d bytes after the planes, want %d", ErrCorrupt, len(tail), len(out)-4*n)
	}
	if asForm {
		joinLow(out[2*n:4*n], ps.buf, rlo, n)
	} else {
		joinHalves(out, hi, ps.buf, rlo, n)
	}
	copy(out[4*n:], tail)
	return nil
}

// SplitForm writes into form (len(plain) bytes) the split form of a
// float32 chunk's plain bytes: the high halves of its elements, then their
// low halves (uint16 LE), then the bytes after the last element. A chain
// of split16 chunks decodes in this form (DecodeForm16) and only its top
// is joined, so no level cuts its reference.
func SplitForm(form, plain []byte) {
	n := len(plain) / 4
	cutHalves(form[:2*n], form[2*n:4*n], plain, n)
	copy(form[4*n:], plain[4*n:])
}

// DecodeForm16 appends to dst the split16 float32 chunk enc, given its
// reference's split form for a delta: as its own split form (asForm; not
// checked, for a chunk that only serves as the next one's reference), or
// as its plain bytes, checked against the chunk's checksum. A chunk that
// HighViewable refuses is refused here (ErrUnsupported).
func DecodeForm16(dst, enc, refForm []byte, asForm bool) ([]byte, error) {
	cd := getCoder()
	defer putCoder(cd)
	h, err := parseHeader(enc)
	if err != nil {
		return dst, fmt.Errorf("decode split form: %w", err)
	}
	if len(enc) != h.EncodedLen {
		return dst, fmt.Errorf("decode split form: %w: %d bytes after the payload", ErrCorrupt, len(enc)-h.EncodedLen)
	}
	if !HighViewable(enc) {
		return dst, fmt.Errorf("decode split form: %w: a %s %s chunk", ErrUnsupported, h.Codec, h.DType)
	}
	if h.Delta && len(refForm) != h.PlainLen {
		return dst, fmt.Errorf("decode split form: %w: reference of %d bytes, want %d", ErrRefMismatch, len(refForm), h.PlainLen)
	}
	cd.largest = max(cd.largest, h.PlainLen)
	sp, err := parseSplit(enc[h.HeaderLen:], h.Delta)
	if err != nil {
		return dst, fmt.Errorf("decode split form: %w", err)
	}
	start := len(dst)
	dst = grow(dst, start+h.PlainLen)
	out := dst[start:]
	switch {
	case sp.mode == s16Same && asForm:
		copy(out, refForm)
		return dst, nil
	case sp.mode == s16Same:
		joinForm(out, refForm)
	default:
		if !h.Delta {
			refForm = nil
		}
		if err := cd.decodeForm(out, sp, refForm, asForm); err != nil {
			return dst[:start], fmt.Errorf("decode split form: %w", err)
		}
	}
	if !asForm {
		if got := checksum(out); got != h.CRC {
			return dst[:start], fmt.Errorf("decode split form: %w: crc %08x, want %08x", ErrChecksum, got, h.CRC)
		}
	}
	return dst, nil
}

// joinForm writes the plain bytes of a split form into out.
func joinForm(out, form []byte) {
	n := len(out) / 4
	hi, lo := form[:2*n], form[2*n:4*n]
	n4 := n &^ 3
	for i := 0; i < n4; i += 4 {
		h := binary.LittleEndian.Uint64(hi[2*i:])
		l := binary.LittleEndian.Uint64(lo[2*i:])
		binary.LittleEndian.PutUint64(out[4*i:], l&0xffff|(h&0xffff)<<16|(l>>16&0xffff)<<32|(h>>16&0xffff)<<48)
		binary.LittleEndian.PutUint64(out[4*i+8:], l>>32&0xffff|(h>>32&0xffff)<<16|(l>>48)<<32|(h>>48)<<48)
	}
	for i := n4; i < n; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(binary.LittleEndian.Uint16(hi[2*i:]))<<16|uint32(binary.LittleEndian.Uint16(lo[2*i:])))
	}
	copy(out[4*n:], form[4*n:])
}

// HighProbeLen is how many of a chunk's first bytes HighPrefixLen needs.
const HighProbeLen = headerLen + splitHeaderLen

// HighPrefixLen reports whether DecodeHigh16 can rebuild the chunk whose
// first bytes are probe (at least HighProbeLen of them, or the whole
// chunk): a split16 chunk of float32 elements, or one equal to its
// reference. need is how many of its bytes it reads: the header and the
// high records, or the whole chunk when plain bytes follow the last
// element (they are stored at its end). A view read from the object store
// fetches those bytes alone; the local device reads whole chunks
// (docs/ARCHIVE.md says why).
func HighPrefixLen(probe []byte) (need int, ok bool) {
	h, err := parseHeaderPrefix(probe)
	if err != nil || h.Codec != Split16 || h.DType != Float32 || h.PlainLen < 4 || h.EncodedLen == h.HeaderLen {
		return 0, false
	}
	payload := probe[h.HeaderLen:min(len(probe), h.EncodedLen)]
	switch {
	case len(payload) == 0 || payload[0] == s16Planes:
		return 0, false
	case payload[0] == s16Same || h.PlainLen%4 != 0:
		return h.EncodedLen, true
	case len(payload) < splitHeaderLen:
		return 0, false
	}
	need = h.HeaderLen + splitHeaderLen + int(binary.LittleEndian.Uint32(payload[1:]))
	if need > h.EncodedLen {
		return 0, false
	}
	return need, true
}

// HighViewable reports whether DecodeHigh16 can rebuild the chunk enc.
func HighViewable(enc []byte) bool {
	_, ok := HighPrefixLen(enc)
	return ok
}

// HighLen is the length of a chunk of plain bytes in its high form: the
// high halves of its float32 elements (uint16 LE), then the plain bytes
// after the last element.
func HighLen(plainLen int) int { return 2*(plainLen/4) + plainLen%4 }

// DecodeHigh16 appends to dst the high form (HighLen) of the split16 chunk
// enc, or of its first HighPrefixLen bytes, given its reference's high
// form for a delta, reading only the high planes. verify checks the high
// halves against the chunk's checksum of them (the tail is not covered:
// it is stored plain, and the chunk's own checksum covers it in an exact
// read). A view of the chunk's values cut to bfloat16 precision is
// WidenHigh of it.
func DecodeHigh16(dst, enc, refHigh []byte, verify bool) ([]byte, error) {
	cd := getCoder()
	defer putCoder(cd)
	return cd.decodeHigh16(dst, enc, refHigh, verify)
}

func (cd *Coder) decodeHigh16(dst, enc, refHigh []byte, verify bool) ([]byte, error) {
	h, err := parseHeaderPrefix(enc)
	if err != nil {
		return dst, fmt.Errorf("decode high halves: %w", err)
	}
	if h.Codec != Split16 || h.DType != Float32 || h.PlainLen < 4 {
		return dst, fmt.Errorf("decode high halves: %w: a %s %s chunk of %d bytes", ErrUnsupported, h.Codec, h.DType, h.PlainLen)
	}
	need, ok := HighPrefixLen(enc)
	if !ok {
		if len(enc) < h.EncodedLen {
			return dst, fmt.Errorf("decode high halves: %w: %d bytes of a %d-byte chunk", ErrCorrupt, len(enc), h.EncodedLen)
		}
		return dst, fmt.Errorf("decode high halves: %w: no high records", ErrUnsupported)
	}
	if len(enc) < need || len(enc) > h.EncodedLen {
		return dst, fmt.Errorf("decode high halves: %w: %d bytes given, %d needed of %d", ErrCorrupt, len(enc), need, h.EncodedLen)
	}
	cd.largest = max(cd.largest, h.PlainLen)
	n, hl := h.PlainLen/4, HighLen(h.PlainLen)
	if h.Delta && len(refHigh) != hl {
		return dst, fmt.Errorf("decode high halves: %w: reference of %d bytes, want %d", ErrRefMismatch, len(refHigh), hl)
	}
	sp, err := parseSplit(enc[h.HeaderLen:], h.Delta)
	if err != nil {
		return dst, fmt.Errorf("decode high halves: %w", err)
	}
	start := len(dst)
	dst = grow(dst, start+hl)
	out := dst[start:]
	if sp.mode == s16Same {
		copy(out, refHigh)
		return dst, nil
	}
	var rhi []byte
	if h.Delta {
		rhi = refHigh[:2*n]
	}
	if err := cd.pl.decodeHigh(out[:2*n], sp, rhi, n, cd.zstdInto); err != nil {
		return dst[:start], fmt.Errorf("decode high halves: %w", err)
	}
	if tailLen := h.PlainLen - 4*n; tailLen > 0 {
		if len(enc) != h.EncodedLen || len(sp.rest) < tailLen {
			return dst[:start], fmt.Errorf("decode high halves: %w: tail missing", ErrCorrupt)
		}
		copy(out[2*n:], sp.rest[len(sp.rest)-tailLen:])
	}
	if verify {
		if got := checksum(out[:2*n]); got != sp.crc {
			return dst[:start], fmt.Errorf("decode high halves: %w: crc %08x, want %08x", ErrChecksum, got, sp.crc)
		}
	}
	return dst, nil
}

// WidenHigh writes into out (the plain length) the float32 values of a
// high form with their low 16 bits zero, and the tail as it is.
func WidenHigh(out, high []byte) {
	n := len(out) / 4
	i := 0
	for ; i+4 <= n; i += 4 {
		w := binary.LittleEndian.Uint64(high[2*i:])
		binary.LittleEndian.PutUint64(out[4*i:], w&0xffff<<16|w&0xffff0000<<32)
		binary.LittleEndian.PutUint64(out[4*i+8:], w>>16&0xffff0000|w>>32&0xffff0000<<32)
	}
	for ; i < n; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(binary.LittleEndian.Uint16(high[2*i:]))<<16)
	}
	copy(out[4*n:], high[2*n:])
}

// TruncateFloat32 zeroes the low 16 bits of every float32 element of b
// (the bytes after the last whole element stay): the exact bytes of a
// float32 chunk as a view at bfloat16 precision shows them.
func TruncateFloat32(b []byte) {
	n := len(b) / 4
	for i := 0; i < n; i++ {
		b[4*i], b[4*i+1] = 0, 0
	}
}

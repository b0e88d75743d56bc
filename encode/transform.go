package encode

import (
	"encoding/binary"
	"math/bits"
)

// Element transforms of the planes codec. A chunk of n elements becomes w
// byte planes of n bytes (plane j holds byte j, least significant first, of
// each transformed element):
//
//	baseline: v = rot(u >> t)                          (floats only)
//	xor:      v = (p ^ r) >> t
//	sub:      v = zigzag((mono(p) - mono(r)) >> t)   (arithmetic shift)
//
// t counts trailing bits zero in every element of the chunk and of its
// reference: bf16 or fp16 values widened to fp32 have 16 or 13, and dropping
// them turns the low planes into constants. With hi = ^(2^t-1),
// mono(u) = u ^ (hi if u is negative else the sign bit) orders all floats as
// unsigned integers and keeps the low t bits zero, so nearby floats give a
// small SUB delta; zigzag folds its sign into bit 0. rot rotates the
// (8w - t)-bit value left by one bit, so that a baseline's top plane holds
// the exponent rather than sign and exponent (swar.go says why).
//
// transform16.go and transform32.go hold the fast 16/32-bit versions; this
// file has the 64-bit one and the per-width dispatch.
type planeMode uint8

const (
	modeBase planeMode = iota
	modeXOR
	modeSUB
	modeSame // the chunk equals its reference: no planes at all
)

func sub64(p, r uint64, t uint, hi uint64) uint64 {
	p ^= uint64(int64(p)>>63)&hi | 1<<63
	r ^= uint64(int64(r)>>63)&hi | 1<<63
	d := int64(p-r) >> (t & 63)
	return uint64(d<<1 ^ d>>63)
}

func unsub64(z, r uint64, t uint, hi uint64) uint64 {
	r ^= uint64(int64(r)>>63)&hi | 1<<63
	d := int64(z>>1) ^ -int64(z&1)
	m := r + uint64(d)<<(t&63)
	return m ^ (^uint64(int64(m)>>63)&hi | 1<<63)
}

func split64(pl, plain, ref []byte, n int, mode planeMode, t uint) {
	pl, plain = pl[:8*n], plain[:8*n]
	hi := ^(uint64(1)<<t - 1)
	for i := 0; i < n; i++ {
		v := binary.LittleEndian.Uint64(plain[8*i:])
		switch mode {
		case modeBase:
			v = rotk64(v>>(t&63), 64-t)
		case modeXOR:
			v = (v ^ binary.LittleEndian.Uint64(ref[8*i:])) >> (t & 63)
		case modeSUB:
			v = sub64(v, binary.LittleEndian.Uint64(ref[8*i:]), t, hi)
		}
		for j := 0; j < 8; j++ {
			pl[j*n+i] = byte(v >> (8 * j))
		}
	}
}

func join64(out, pl, ref []byte, n int, mode planeMode, t uint) {
	pl, out = pl[:8*n], out[:8*n]
	hi := ^(uint64(1)<<t - 1)
	for i := 0; i < n; i++ {
		var v uint64
		for j := 0; j < 8; j++ {
			v |= uint64(pl[j*n+i]) << (8 * j)
		}
		switch mode {
		case modeBase:
			v = unrotk64(v, 64-t) << (t & 63)
		case modeXOR:
			v = binary.LittleEndian.Uint64(ref[8*i:]) ^ v<<(t&63)
		case modeSUB:
			v = unsub64(v, binary.LittleEndian.Uint64(ref[8*i:]), t, hi)
		}
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
}

// split8 and join8 handle the Bytes dtype: one plane, no float ordering;
// SUB is plain byte subtraction.
func split8(pl, plain, ref []byte, n int, mode planeMode) {
	switch mode {
	case modeBase:
		copy(pl, plain[:n])
	case modeXOR:
		xorInto(pl, plain[:n], ref)
	case modeSUB:
		pl, ref = pl[:n], ref[:n]
		for i, p := range plain[:n] {
			pl[i] = p - ref[i]
		}
	}
}

func join8(out, pl, ref []byte, n int, mode planeMode) {
	switch mode {
	case modeBase:
		copy(out, pl[:n])
	case modeXOR:
		xorInto(out, pl[:n], ref)
	case modeSUB:
		out, ref = out[:n], ref[:n]
		for i, d := range pl[:n] {
			out[i] = d + ref[i]
		}
	}
}

func splitAny(pl, plain, ref []byte, n, w int, mode planeMode, t uint) {
	switch w {
	case 1:
		split8(pl, plain, ref, n, mode)
	case 2:
		split16(pl, plain, ref, n, mode, t)
	case 4:
		split32(pl, plain, ref, n, mode, t)
	default:
		split64(pl, plain, ref, n, mode, t)
	}
}

func joinAny(out, pl, ref []byte, n, w int, mode planeMode, t uint) {
	switch w {
	case 1:
		join8(out, pl, ref, n, mode)
	case 2:
		join16(out, pl, ref, n, mode, t)
	case 4:
		join32(out, pl, ref, n, mode, t)
	default:
		join64(out, pl, ref, n, mode, t)
	}
}

// shiftOf is the number of trailing bits zero in every element of plain and
// ref (nil for a baseline); 0 when they are all zero.
func shiftOf(w int, plain, ref []byte, n int) uint {
	var or uint64
	switch w {
	case 2:
		or = uint64(or16(plain, n))
		if ref != nil {
			or |= uint64(or16(ref, n))
		}
	case 4:
		or = uint64(or32(plain, n))
		if ref != nil {
			or |= uint64(or32(ref, n))
		}
	case 8:
		for i := 0; i < n; i++ {
			or |= binary.LittleEndian.Uint64(plain[8*i:])
			if ref != nil {
				or |= binary.LittleEndian.Uint64(ref[8*i:])
			}
		}
	}
	if or == 0 {
		return 0
	}
	return uint(bits.TrailingZeros64(or))
}

func rotk64(v uint64, k uint) uint64 {
	return (v<<1 | v>>((k-1)&63)) & (^uint64(0) >> ((64 - k) & 63))
}

func unrotk64(v uint64, k uint) uint64 { return v>>1 | (v&1)<<((k-1)&63) }

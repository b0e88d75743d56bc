package encode

import "encoding/binary"

// Little-endian element access for the bit-serial codecs (dynrle, rle4),
// which work on any width through uint64. The planes codec has its own
// width-specialised loops because it must be fast.

func loadWord(b []byte, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	default:
		return binary.LittleEndian.Uint64(b)
	}
}

func storeWord(b []byte, w int, v uint64) {
	switch w {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// fpLayout splits an element into the exponent (entropy coded in dynrle
// baselines) and the rest (sign and mantissa, stored raw).
type fpLayout struct {
	w        int  // bytes per element
	bits     uint // 8*w
	expBits  uint
	mantBits uint
	signed   bool // false for Bytes: the whole byte is the "exponent"
}

func layoutOf(dt DType) fpLayout {
	switch dt {
	case Float32:
		return fpLayout{w: 4, bits: 32, expBits: 8, mantBits: 23, signed: true}
	case Float16:
		return fpLayout{w: 2, bits: 16, expBits: 5, mantBits: 10, signed: true}
	case BFloat16:
		return fpLayout{w: 2, bits: 16, expBits: 8, mantBits: 7, signed: true}
	case Float64:
		return fpLayout{w: 8, bits: 64, expBits: 11, mantBits: 52, signed: true}
	default:
		return fpLayout{w: 1, bits: 8, expBits: 8}
	}
}

func (l fpLayout) restBits() uint {
	if l.signed {
		return l.mantBits + 1
	}
	return 0
}

func (l fpLayout) split(u uint64) (exp, rest uint64) {
	if !l.signed {
		return u, 0
	}
	exp = u >> l.mantBits & (1<<l.expBits - 1)
	rest = u>>(l.bits-1)<<l.mantBits | u&(1<<l.mantBits-1)
	return exp, rest
}

func (l fpLayout) join(exp, rest uint64) uint64 {
	if !l.signed {
		return exp
	}
	return rest>>l.mantBits<<(l.bits-1) | exp<<l.mantBits | rest&(1<<l.mantBits-1)
}

package encode

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Element transforms of the planes codec, specialised per element width by
// generics (one instantiation per width, so loads and shifts are constants).
//
// A chunk of n elements becomes w byte planes of n bytes (plane 0 holds the
// least significant byte of each transformed element). The transforms:
//
//	baseline: v = u >> t
//	xor:      v = (p ^ r) >> t
//	sub:      v = zigzag(mono(p >> t) - mono(r >> t))
//
// t is a count of trailing bits that are zero in every element of the chunk
// (and of its reference): bf16 or fp16 values widened to fp32 have 16 or 13,
// and dropping them turns the low planes into constants. mono maps the
// sign-magnitude float bits of a (8w - t)-bit value to an unsigned integer of
// the same order, so the SUB delta of two nearby floats is a small integer,
// zigzag folds its sign into bit 0.
type word interface {
	~uint16 | ~uint32 | ~uint64
}

func wordSize[T word]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

func load[T word](b []byte) T {
	switch wordSize[T]() {
	case 2:
		return T(binary.LittleEndian.Uint16(b))
	case 4:
		return T(binary.LittleEndian.Uint32(b))
	default:
		return T(binary.LittleEndian.Uint64(b))
	}
}

func store[T word](b []byte, v T) {
	switch wordSize[T]() {
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, uint64(v))
	}
}

// monoParams: for k-bit values (k = 8w - t), sign is the top bit, mask all k.
func monoParams[T word](t uint) (sign, mask T) {
	k := uint(8*wordSize[T]()) - t
	return T(1) << (k - 1), T(1)<<(k-1) | (T(1)<<(k-1) - 1)
}

// mono: positive values get their sign bit set, negative ones are inverted,
// so the integer order is the float order (-0 sits just below +0).
func mono[T word](x, sign, mask T) T {
	neg := -(x & sign >> (bits.Len64(uint64(sign)) - 1)) // all ones if negative
	return x ^ (neg&mask | sign)
}

func unmono[T word](m, sign, mask T) T {
	pos := -(m & sign >> (bits.Len64(uint64(sign)) - 1)) // all ones if positive
	return m ^ (^pos&mask | sign)
}

func zigzag[T word](d T) T {
	top := uint(8*wordSize[T]()) - 1
	return d<<1 ^ -(d >> top)
}

func unzigzag[T word](z T) T { return z>>1 ^ -(z & 1) }

// orWords returns the OR of all elements of b (n whole elements).
func orWords[T word](b []byte, n int) T {
	sz := wordSize[T]()
	var acc T
	for i := 0; i < n; i++ {
		acc |= load[T](b[i*sz:])
	}
	return acc
}

// splitPlanes writes the transform of n elements into w planes of pl, which
// holds w*n bytes: plane j is pl[j*n:(j+1)*n].
func splitPlanes[T word](pl, plain, ref []byte, n int, mode planeMode, t uint) {
	sz := wordSize[T]()
	plain = plain[:n*sz]
	pl = pl[:n*sz]
	put := func(i int, v T) {
		for j := 0; j < sz; j++ {
			pl[j*n+i] = byte(v >> (8 * j))
		}
	}
	switch mode {
	case modeBase:
		for i := 0; i < n; i++ {
			put(i, load[T](plain[i*sz:])>>t)
		}
	case modeXOR:
		ref = ref[:n*sz]
		for i := 0; i < n; i++ {
			put(i, (load[T](plain[i*sz:])^load[T](ref[i*sz:]))>>t)
		}
	case modeSUB:
		ref = ref[:n*sz]
		sign, mask := monoParams[T](t)
		for i := 0; i < n; i++ {
			p := mono(load[T](plain[i*sz:])>>t, sign, mask)
			r := mono(load[T](ref[i*sz:])>>t, sign, mask)
			put(i, zigzag(p-r))
		}
	}
}

// joinPlanes inverts splitPlanes into out (n whole elements).
func joinPlanes[T word](out, pl, ref []byte, n int, mode planeMode, t uint) {
	sz := wordSize[T]()
	out = out[:n*sz]
	pl = pl[:n*sz]
	get := func(i int) T {
		var v T
		for j := 0; j < sz; j++ {
			v |= T(pl[j*n+i]) << (8 * j)
		}
		return v
	}
	switch mode {
	case modeBase:
		for i := 0; i < n; i++ {
			store(out[i*sz:], get(i)<<t)
		}
	case modeXOR:
		ref = ref[:n*sz]
		for i := 0; i < n; i++ {
			store(out[i*sz:], load[T](ref[i*sz:])^get(i)<<t)
		}
	case modeSUB:
		ref = ref[:n*sz]
		sign, mask := monoParams[T](t)
		for i := 0; i < n; i++ {
			r := mono(load[T](ref[i*sz:])>>t, sign, mask)
			m := (r + unzigzag(get(i))) & mask
			store(out[i*sz:], unmono(m, sign, mask)<<t)
		}
	}
}

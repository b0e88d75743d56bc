package encode

import "encoding/binary"

// 16-bit split/join (bf16, fp16): eight elements are two 64-bit rows; the
// low and high bytes are gathered with shift-and-mask packing.

// pack4 gathers the low bytes of the four 16-bit lanes of x into 32 bits.
func pack4(x uint64) uint64 {
	x &= 0x00FF00FF00FF00FF
	x = (x | x>>8) & 0x0000FFFF0000FFFF
	return (x | x>>16) & 0xFFFFFFFF
}

// spread4 is the inverse of pack4: 4 bytes into the low bytes of 16-bit lanes.
func spread4(x uint64) uint64 {
	x &= 0xFFFFFFFF
	x = (x | x<<16) & 0x0000FFFF0000FFFF
	return (x | x<<8) & 0x00FF00FF00FF00FF
}

// sub16 and unsub16 are sub32 and unsub32 for 16-bit elements.
func sub16(p, r uint16, t uint, hi uint16) uint16 {
	p ^= uint16(int16(p)>>15)&hi | 1<<15
	r ^= uint16(int16(r)>>15)&hi | 1<<15
	d := int16(p-r) >> (t & 15)
	return uint16(d<<1 ^ d>>15)
}

func unsub16(z, r uint16, t uint, hi uint16) uint16 {
	r ^= uint16(int16(r)>>15)&hi | 1<<15
	d := int16(z>>1) ^ -int16(z&1)
	m := r + uint16(d)<<(t&15)
	return m ^ (^uint16(int16(m)>>15)&hi | 1<<15)
}

// sub16x4 applies sub16 to the four lanes of x and y.
func sub16x4(x, y uint64, t uint, hi uint16) uint64 {
	return uint64(sub16(uint16(x), uint16(y), t, hi)) |
		uint64(sub16(uint16(x>>16), uint16(y>>16), t, hi))<<16 |
		uint64(sub16(uint16(x>>32), uint16(y>>32), t, hi))<<32 |
		uint64(sub16(uint16(x>>48), uint16(y>>48), t, hi))<<48
}

func unsub16x4(x, y uint64, t uint, hi uint16) uint64 {
	return uint64(unsub16(uint16(x), uint16(y), t, hi)) |
		uint64(unsub16(uint16(x>>16), uint16(y>>16), t, hi))<<16 |
		uint64(unsub16(uint16(x>>32), uint16(y>>32), t, hi))<<32 |
		uint64(unsub16(uint16(x>>48), uint16(y>>48), t, hi))<<48
}

func split16(pl, plain, ref []byte, n int, mode planeMode, t uint) {
	p0, p1 := pl[:n:n], pl[n:2*n:2*n]
	plain = plain[:2*n]
	if mode != modeBase {
		ref = ref[:2*n]
	}
	hi := ^(uint16(1)<<t - 1) // t < 16
	k := 16 - t
	laneMask := uint64(0xFFFF>>t) * 0x0001000100010001
	n8 := n &^ 7
	for i := simdSplit(2, pl, plain, ref, n, mode, t); i < n8; i += 8 {
		s := plain[2*i : 2*i+16]
		x0 := binary.LittleEndian.Uint64(s[0:])
		x1 := binary.LittleEndian.Uint64(s[8:])
		switch mode {
		case modeXOR:
			r := ref[2*i : 2*i+16]
			x0 = (x0 ^ binary.LittleEndian.Uint64(r[0:])) >> t & laneMask
			x1 = (x1 ^ binary.LittleEndian.Uint64(r[8:])) >> t & laneMask
		case modeBase:
			x0, x1 = lanes16.rotLanes(x0>>t&laneMask, laneMask, k), lanes16.rotLanes(x1>>t&laneMask, laneMask, k)
		case modeSUB:
			r := ref[2*i : 2*i+16]
			y0, y1 := binary.LittleEndian.Uint64(r[0:]), binary.LittleEndian.Uint64(r[8:])
			if t == 0 {
				x0, x1 = lanes16.subLanes(x0, y0), lanes16.subLanes(x1, y1)
				break
			}
			x0, x1 = sub16x4(x0, y0, t, hi), sub16x4(x1, y1, t, hi)
		}
		binary.LittleEndian.PutUint64(p0[i:], pack4(x0)|pack4(x1)<<32)
		binary.LittleEndian.PutUint64(p1[i:], pack4(x0>>8)|pack4(x1>>8)<<32)
	}
	for i := n8; i < n; i++ {
		v := binary.LittleEndian.Uint16(plain[2*i:])
		switch mode {
		case modeBase:
			v = uint16(rotk32(uint32(v>>t), k))
		case modeXOR:
			v = (v ^ binary.LittleEndian.Uint16(ref[2*i:])) >> t
		case modeSUB:
			v = sub16(v, binary.LittleEndian.Uint16(ref[2*i:]), t, hi)
		}
		p0[i], p1[i] = byte(v), byte(v>>8)
	}
}

func join16(out, pl, ref []byte, n int, mode planeMode, t uint) {
	p0, p1 := pl[:n:n], pl[n:2*n:2*n]
	out = out[:2*n]
	if mode != modeBase {
		ref = ref[:2*n]
	}
	hi := ^(uint16(1)<<t - 1) // t < 16
	k := 16 - t
	laneMask := uint64(0xFFFF>>t) * 0x0001000100010001
	n8 := n &^ 7
	for i := simdJoin(2, out, pl, ref, n, mode, t); i < n8; i += 8 {
		q0 := binary.LittleEndian.Uint64(p0[i:])
		q1 := binary.LittleEndian.Uint64(p1[i:])
		x0 := spread4(q0) | spread4(q1)<<8
		x1 := spread4(q0>>32) | spread4(q1>>32)<<8
		o := out[2*i : 2*i+16]
		switch mode {
		case modeBase:
			x0, x1 = lanes16.unrotLanes(x0, laneMask, k)<<t, lanes16.unrotLanes(x1, laneMask, k)<<t
		case modeXOR:
			r := ref[2*i : 2*i+16]
			x0 = x0<<t ^ binary.LittleEndian.Uint64(r[0:])
			x1 = x1<<t ^ binary.LittleEndian.Uint64(r[8:])
		case modeSUB:
			r := ref[2*i : 2*i+16]
			y0, y1 := binary.LittleEndian.Uint64(r[0:]), binary.LittleEndian.Uint64(r[8:])
			if t == 0 {
				x0, x1 = lanes16.unsubLanes(x0, y0), lanes16.unsubLanes(x1, y1)
				break
			}
			x0, x1 = unsub16x4(x0, y0, t, hi), unsub16x4(x1, y1, t, hi)
		}
		binary.LittleEndian.PutUint64(o[0:], x0)
		binary.LittleEndian.PutUint64(o[8:], x1)
	}
	for i := n8; i < n; i++ {
		v := uint16(p0[i]) | uint16(p1[i])<<8
		switch mode {
		case modeBase:
			v = uint16(unrotk32(uint32(v), k)) << t
		case modeXOR:
			v = binary.LittleEndian.Uint16(ref[2*i:]) ^ v<<t
		case modeSUB:
			v = unsub16(v, binary.LittleEndian.Uint16(ref[2*i:]), t, hi)
		}
		binary.LittleEndian.PutUint16(out[2*i:], v)
	}
}

// or32 and or16 return the OR of all n elements of b, eight bytes at a time.
func or32(b []byte, n int) uint32 {
	b = b[:4*n]
	var acc uint64
	i := 0
	for ; i+32 <= len(b); i += 32 {
		acc |= binary.LittleEndian.Uint64(b[i:]) | binary.LittleEndian.Uint64(b[i+8:]) |
			binary.LittleEndian.Uint64(b[i+16:]) | binary.LittleEndian.Uint64(b[i+24:])
	}
	for ; i+8 <= len(b); i += 8 {
		acc |= binary.LittleEndian.Uint64(b[i:])
	}
	acc = acc | acc>>32
	if i < len(b) {
		acc |= uint64(binary.LittleEndian.Uint32(b[i:]))
	}
	return uint32(acc)
}

func or16(b []byte, n int) uint16 {
	b = b[:2*n]
	v := or32(b[:len(b)&^3], len(b)/4)
	v |= v >> 16
	if len(b)&3 != 0 {
		v |= uint32(binary.LittleEndian.Uint16(b[len(b)-2:]))
	}
	return uint16(v)
}

package encode

import "encoding/binary"

// Width-specialised split/join for 16- and 32-bit elements, the hot paths
// (fp32, bf16, fp16 tensors). Same transforms as splitPlanes/joinPlanes. The
// byte transposition works on eight elements at a time with SWAR shuffles in
// 64-bit registers, so each plane gets one 8-byte store per eight elements.

// transpose4x4 transposes the 4x4 byte matrix held as rows e0|e1<<32 (a)
// and e2|e3<<32 (b): afterwards a = q0|q1<<32 and b = q2|q3<<32, where qj
// holds byte j of e0..e3. It is its own inverse.
func transpose4x4(a, b uint64) (uint64, uint64) {
	t := (a>>16 ^ b) & 0x0000FFFF0000FFFF
	b ^= t
	a ^= t << 16
	t = (a>>24 ^ a) & 0x00000000FF00FF00
	a ^= t ^ t<<24
	t = (b>>24 ^ b) & 0x00000000FF00FF00
	b ^= t ^ t<<24
	return a, b
}

// put8x4 stores 8 elements, given as 4 rows of two, into planes p0..p3 at i.
func put8x4(p0, p1, p2, p3 []byte, i int, a0, b0, a1, b1 uint64) {
	a0, b0 = transpose4x4(a0, b0)
	a1, b1 = transpose4x4(a1, b1)
	const lo = 0xFFFFFFFF
	binary.LittleEndian.PutUint64(p0[i:], a0&lo|a1<<32)
	binary.LittleEndian.PutUint64(p1[i:], a0>>32|a1&^lo)
	binary.LittleEndian.PutUint64(p2[i:], b0&lo|b1<<32)
	binary.LittleEndian.PutUint64(p3[i:], b0>>32|b1&^lo)
}

// get8x4 loads 8 elements from planes p0..p3 at i, as 4 rows of two.
func get8x4(p0, p1, p2, p3 []byte, i int) (a0, b0, a1, b1 uint64) {
	const lo = 0xFFFFFFFF
	q0 := binary.LittleEndian.Uint64(p0[i:])
	q1 := binary.LittleEndian.Uint64(p1[i:])
	q2 := binary.LittleEndian.Uint64(p2[i:])
	q3 := binary.LittleEndian.Uint64(p3[i:])
	a0, b0 = transpose4x4(q0&lo|q1<<32, q2&lo|q3<<32)
	a1, b1 = transpose4x4(q0>>32|q1&^lo, q2>>32|q3&^lo)
	return
}

// sub32 is the SUB transform of one element pair; unsub32 inverts it.
// With low = 2^t-1 (bits zero in both elements), mono maps a negative float
// to ^u with the low bits kept zero and a positive one to u|sign, which
// orders all floats as unsigned integers; the difference then has t zero low
// bits, which the arithmetic shift drops, and zigzag folds in the sign.
func sub32(p, r uint32, t uint, hi uint32) uint32 {
	p ^= uint32(int32(p)>>31)&hi | 1<<31
	r ^= uint32(int32(r)>>31)&hi | 1<<31
	d := int32(p-r) >> (t & 31)
	return uint32(d<<1 ^ d>>31)
}

func unsub32(z, r uint32, t uint, hi uint32) uint32 {
	r ^= uint32(int32(r)>>31)&hi | 1<<31
	d := int32(z>>1) ^ -int32(z&1)
	m := r + uint32(d)<<(t&31)
	return m ^ (^uint32(int32(m)>>31)&hi | 1<<31)
}

func split32(pl, plain, ref []byte, n int, mode planeMode, t uint) {
	p0, p1, p2, p3 := pl[:n:n], pl[n:2*n:2*n], pl[2*n:3*n:3*n], pl[3*n:4*n:4*n]
	plain = plain[:4*n]
	if mode != modeBase {
		ref = ref[:4*n]
	}
	hi := ^(uint32(1)<<t - 1) // t < 32
	k := 32 - t
	laneMask := uint64(0xFFFFFFFF>>t) * 0x0000000100000001
	n8 := n &^ 7
	for i := simdSplit(4, pl, plain, ref, n, mode, t); i < n8; i += 8 {
		s := plain[4*i : 4*i+32]
		x0 := binary.LittleEndian.Uint64(s[0:])
		x1 := binary.LittleEndian.Uint64(s[8:])
		x2 := binary.LittleEndian.Uint64(s[16:])
		x3 := binary.LittleEndian.Uint64(s[24:])
		switch mode {
		case modeXOR:
			r := ref[4*i : 4*i+32]
			x0 = (x0 ^ binary.LittleEndian.Uint64(r[0:])) >> t & laneMask
			x1 = (x1 ^ binary.LittleEndian.Uint64(r[8:])) >> t & laneMask
			x2 = (x2 ^ binary.LittleEndian.Uint64(r[16:])) >> t & laneMask
			x3 = (x3 ^ binary.LittleEndian.Uint64(r[24:])) >> t & laneMask
		case modeBase:
			x0, x1 = lanes32.rotLanes(x0>>t&laneMask, laneMask, k), lanes32.rotLanes(x1>>t&laneMask, laneMask, k)
			x2, x3 = lanes32.rotLanes(x2>>t&laneMask, laneMask, k), lanes32.rotLanes(x3>>t&laneMask, laneMask, k)
		case modeSUB:
			r := ref[4*i : 4*i+32]
			y0 := binary.LittleEndian.Uint64(r[0:])
			y1 := binary.LittleEndian.Uint64(r[8:])
			y2 := binary.LittleEndian.Uint64(r[16:])
			y3 := binary.LittleEndian.Uint64(r[24:])
			if t == 0 {
				x0, x1 = lanes32.subLanes(x0, y0), lanes32.subLanes(x1, y1)
				x2, x3 = lanes32.subLanes(x2, y2), lanes32.subLanes(x3, y3)
				break
			}
			x0 = uint64(sub32(uint32(x0), uint32(y0), t, hi)) | uint64(sub32(uint32(x0>>32), uint32(y0>>32), t, hi))<<32
			x1 = uint64(sub32(uint32(x1), uint32(y1), t, hi)) | uint64(sub32(uint32(x1>>32), uint32(y1>>32), t, hi))<<32
			x2 = uint64(sub32(uint32(x2), uint32(y2), t, hi)) | uint64(sub32(uint32(x2>>32), uint32(y2>>32), t, hi))<<32
			x3 = uint64(sub32(uint32(x3), uint32(y3), t, hi)) | uint64(sub32(uint32(x3>>32), uint32(y3>>32), t, hi))<<32
		}
		put8x4(p0, p1, p2, p3, i, x0, x1, x2, x3)
	}
	for i := n8; i < n; i++ {
		v := binary.LittleEndian.Uint32(plain[4*i:])
		switch mode {
		case modeBase:
			v = rotk32(v>>t, k)
		case modeXOR:
			v = (v ^ binary.LittleEndian.Uint32(ref[4*i:])) >> t
		case modeSUB:
			v = sub32(v, binary.LittleEndian.Uint32(ref[4*i:]), t, hi)
		}
		p0[i], p1[i], p2[i], p3[i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
}

func join32(out, pl, ref []byte, n int, mode planeMode, t uint) {
	p0, p1, p2, p3 := pl[:n:n], pl[n:2*n:2*n], pl[2*n:3*n:3*n], pl[3*n:4*n:4*n]
	out = out[:4*n]
	if mode != modeBase {
		ref = ref[:4*n]
	}
	hi := ^(uint32(1)<<t - 1) // t < 32
	k := 32 - t
	laneMask := uint64(0xFFFFFFFF>>t) * 0x0000000100000001
	n8 := n &^ 7
	for i := simdJoin(4, out, pl, ref, n, mode, t); i < n8; i += 8 {
		x0, x1, x2, x3 := get8x4(p0, p1, p2, p3, i)
		o := out[4*i : 4*i+32]
		switch mode {
		case modeBase:
			x0, x1 = lanes32.unrotLanes(x0, laneMask, k)<<t, lanes32.unrotLanes(x1, laneMask, k)<<t
			x2, x3 = lanes32.unrotLanes(x2, laneMask, k)<<t, lanes32.unrotLanes(x3, laneMask, k)<<t
		case modeXOR:
			r := ref[4*i : 4*i+32]
			x0 = x0<<t ^ binary.LittleEndian.Uint64(r[0:])
			x1 = x1<<t ^ binary.LittleEndian.Uint64(r[8:])
			x2 = x2<<t ^ binary.LittleEndian.Uint64(r[16:])
			x3 = x3<<t ^ binary.LittleEndian.Uint64(r[24:])
		case modeSUB:
			r := ref[4*i : 4*i+32]
			y0 := binary.LittleEndian.Uint64(r[0:])
			y1 := binary.LittleEndian.Uint64(r[8:])
			y2 := binary.LittleEndian.Uint64(r[16:])
			y3 := binary.LittleEndian.Uint64(r[24:])
			if t == 0 {
				x0, x1 = lanes32.unsubLanes(x0, y0), lanes32.unsubLanes(x1, y1)
				x2, x3 = lanes32.unsubLanes(x2, y2), lanes32.unsubLanes(x3, y3)
				break
			}
			x0 = uint64(unsub32(uint32(x0), uint32(y0), t, hi)) | uint64(unsub32(uint32(x0>>32), uint32(y0>>32), t, hi))<<32
			x1 = uint64(unsub32(uint32(x1), uint32(y1), t, hi)) | uint64(unsub32(uint32(x1>>32), uint32(y1>>32), t, hi))<<32
			x2 = uint64(unsub32(uint32(x2), uint32(y2), t, hi)) | uint64(unsub32(uint32(x2>>32), uint32(y2>>32), t, hi))<<32
			x3 = uint64(unsub32(uint32(x3), uint32(y3), t, hi)) | uint64(unsub32(uint32(x3>>32), uint32(y3>>32), t, hi))<<32
		}
		binary.LittleEndian.PutUint64(o[0:], x0)
		binary.LittleEndian.PutUint64(o[8:], x1)
		binary.LittleEndian.PutUint64(o[16:], x2)
		binary.LittleEndian.PutUint64(o[24:], x3)
	}
	for i := n8; i < n; i++ {
		v := uint32(p0[i]) | uint32(p1[i])<<8 | uint32(p2[i])<<16 | uint32(p3[i])<<24
		switch mode {
		case modeBase:
			v = unrotk32(v, k) << t
		case modeXOR:
			v = binary.LittleEndian.Uint32(ref[4*i:]) ^ v<<t
		case modeSUB:
			v = unsub32(v, binary.LittleEndian.Uint32(ref[4*i:]), t, hi)
		}
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
}

// rotk32 rotates the k-bit value v left by one bit; unrotk32 undoes it.
func rotk32(v uint32, k uint) uint32 {
	return (v<<1 | v>>((k-1)&31)) & (0xFFFFFFFF >> ((32 - k) & 31))
}

func unrotk32(v uint32, k uint) uint32 { return v>>1 | (v&1)<<((k-1)&31) }

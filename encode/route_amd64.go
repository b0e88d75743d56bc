//go:build amd64 && !noasm

package encode

import "golang.org/x/sys/cpu"

// The AVX2 routing kernels of route_amd64.s (see there and group.go). They
// take n, a positive multiple of 8, and at most four groups.

var useRouteAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

//go:noescape
func count32AVX2(ref, plain, mask *byte, n, how, pad int, thr *[4]int32, cur *[4]int)

//go:noescape
func route32AVX2(z, plain, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *uint32)

//go:noescape
func unroute32AVX2(out, z, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *uint32)

// compress32[b] moves the lanes set in b to the front: VPERMD indices.
// expand32[b] is the inverse permutation (first 8 words) and a lane mask of
// b (last 8 words).
var compress32, expand32 = func() (c [256][8]uint32, e [256][16]uint32) {
	for b := 0; b < 256; b++ {
		k := 0
		for p := 0; p < 8; p++ {
			if b>>p&1 == 1 {
				c[b][k] = uint32(p)
				e[b][p] = uint32(k)
				e[b][8+p] = ^uint32(0)
				k++
			}
		}
	}
	return
}()

//go:noescape
func count16AVX2(ref, plain, mask *byte, n, how, pad int, thr *[4]int32, cur *[4]int)

//go:noescape
func route16AVX2(z, plain, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *[16]byte)

//go:noescape
func unroute16AVX2(out, z, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *[16]byte)

// compress16 and expand16 are the same for 16-bit lanes, as VPSHUFB
// controls (0x80 zeroes a byte).
var compress16, expand16 = func() (c, e [256][16]byte) {
	for b := 0; b < 256; b++ {
		for i := range c[b] {
			c[b][i], e[b][i] = 0x80, 0x80
		}
		k := 0
		for p := 0; p < 8; p++ {
			if b>>p&1 == 1 {
				c[b][2*k], c[b][2*k+1] = byte(2*p), byte(2*p+1)
				e[b][2*p], e[b][2*p+1] = byte(2*k), byte(2*k+1)
				k++
			}
		}
	}
	return
}()

// routeKernels reports whether the kernels can route this chunk.
func routeKernels(w int, t uint, k int) bool {
	return useRouteAVX2 && t == 0 && k <= 4 && (w == 2 || w == 4)
}

// countGroups counts the changed elements of each group among the first
// n8 (a multiple of 8). how 1: changed means plain != ref, and the mask
// bytes are written; how 2: the mask says.
func countGroups(w int, ref, plain, mask []byte, n8, how int, thr *[4]int32) (cnt [4]int) {
	if n8 == 0 {
		return
	}
	_ = ref[n8*w-1]
	_ = mask[n8/8-1]
	p := &ref[0]
	if how == 1 {
		_ = plain[n8*w-1]
		p = &plain[0]
	}
	if w == 4 {
		count32AVX2(&ref[0], p, &mask[0], n8, how, 0, thr, &cnt)
	} else {
		count16AVX2(&ref[0], p, &mask[0], n8, how, 0, thr, &cnt)
	}
	return
}

// routeWords transforms the first n8 elements and appends the changed ones
// to their groups' streams in z (word offsets in cur, which must leave
// 8 words of room after each stream).
func routeWords(w int, z, plain, ref, mask []byte, n8 int, mode planeMode, thr *[4]int32, cur *[4]int) {
	if n8 == 0 {
		return
	}
	_ = plain[n8*w-1]
	_ = ref[n8*w-1]
	_ = mask[n8/8-1]
	if w == 4 {
		route32AVX2(&z[0], &plain[0], &ref[0], &mask[0], n8, int(mode), thr, cur, &compress32[0][0])
	} else {
		route16AVX2(&z[0], &plain[0], &ref[0], &mask[0], n8, int(mode), thr, cur, &compress16[0])
	}
}

// unrouteWords is routeWords' inverse, writing n8 elements of out.
func unrouteWords(w int, out, z, ref, mask []byte, n8 int, mode planeMode, thr *[4]int32, cur *[4]int) {
	if n8 == 0 {
		return
	}
	_ = out[n8*w-1]
	_ = ref[n8*w-1]
	_ = mask[n8/8-1]
	if w == 4 {
		unroute32AVX2(&out[0], &z[0], &ref[0], &mask[0], n8, int(mode), thr, cur, &expand32[0][0])
	} else {
		unroute16AVX2(&out[0], &z[0], &ref[0], &mask[0], n8, int(mode), thr, cur, &expand16[0])
	}
}

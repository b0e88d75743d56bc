//go:build amd64 && !noasm

package encode

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2 kernels of transform_amd64.s; tests turn it off
// to check the portable code against them.
var useAVX2 = cpu.X86.HasAVX2

// The kernels transform n elements (a positive multiple of 32) between
// plain (with ref, for the delta modes) and planes stride bytes apart,
// with no dropped bits (t = 0). join's plain is its output.

//go:noescape
func split32AVX2(pl, plain, ref *byte, n, stride, mode int)

//go:noescape
func join32AVX2(pl, plain, ref *byte, n, stride, mode int)

//go:noescape
func split16AVX2(pl, plain, ref *byte, n, stride, mode int)

//go:noescape
func join16AVX2(pl, plain, ref *byte, n, stride, mode int)

// simdSplit runs the AVX2 split on the leading multiple of 32 elements it
// can take and returns how many it did (0: the caller does them all).
func simdSplit(w int, pl, plain, ref []byte, n int, mode planeMode, t uint) int {
	n32 := n &^ 31
	if !useAVX2 || t != 0 || n32 == 0 || (w != 2 && w != 4) {
		return 0
	}
	r := &plain[0]
	if mode != modeBase {
		r = &ref[0]
	}
	if w == 4 {
		_ = pl[3*n+n32-1]
		_ = plain[4*n32-1]
		if mode != modeBase {
			_ = ref[4*n32-1]
		}
		split32AVX2(&pl[0], &plain[0], r, n32, n, int(mode))
	} else {
		_ = pl[n+n32-1]
		_ = plain[2*n32-1]
		if mode != modeBase {
			_ = ref[2*n32-1]
		}
		split16AVX2(&pl[0], &plain[0], r, n32, n, int(mode))
	}
	return n32
}

// simdJoin is simdSplit's inverse.
func simdJoin(w int, out, pl, ref []byte, n int, mode planeMode, t uint) int {
	n32 := n &^ 31
	if !useAVX2 || t != 0 || n32 == 0 || (w != 2 && w != 4) {
		return 0
	}
	r := &out[0]
	if mode != modeBase {
		r = &ref[0]
	}
	if w == 4 {
		_ = pl[3*n+n32-1]
		_ = out[4*n32-1]
		if mode != modeBase {
			_ = ref[4*n32-1]
		}
		join32AVX2(&pl[0], &out[0], r, n32, n, int(mode))
	} else {
		_ = pl[n+n32-1]
		_ = out[2*n32-1]
		if mode != modeBase {
			_ = ref[2*n32-1]
		}
		join16AVX2(&pl[0], &out[0], r, n32, n, int(mode))
	}
	return n32
}

// transposeWords writes the leading multiple of 32 of n w-byte words into
// w planes stride bytes apart and returns how many it did.
func transposeWords(pl []byte, stride int, words []byte, n, w int) int {
	n32 := n &^ 31
	if !useAVX2 || n32 == 0 || (w != 2 && w != 4) {
		return 0
	}
	_ = pl[(w-1)*stride+n32-1]
	_ = words[w*n32-1]
	if w == 4 {
		split32AVX2(&pl[0], &words[0], &words[0], n32, stride, 3)
	} else {
		split16AVX2(&pl[0], &words[0], &words[0], n32, stride, 3)
	}
	return n32
}

// untransposeWords is transposeWords' inverse.
func untransposeWords(words, pl []byte, stride, n, w int) int {
	n32 := n &^ 31
	if !useAVX2 || n32 == 0 || (w != 2 && w != 4) {
		return 0
	}
	_ = pl[(w-1)*stride+n32-1]
	_ = words[w*n32-1]
	if w == 4 {
		join32AVX2(&pl[0], &words[0], &words[0], n32, stride, 3)
	} else {
		join16AVX2(&pl[0], &words[0], &words[0], n32, stride, 3)
	}
	return n32
}

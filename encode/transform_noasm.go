//go:build !amd64 || noasm

package encode

// Without the AVX2 kernels every element goes through the portable code.

var useAVX2 = false

func simdSplit(w int, pl, plain, ref []byte, n int, mode planeMode, t uint) int { return 0 }

func simdJoin(w int, out, pl, ref []byte, n int, mode planeMode, t uint) int { return 0 }

func transposeWords(pl []byte, stride int, words []byte, n, w int) int { return 0 }

func untransposeWords(words, pl []byte, stride, n, w int) int { return 0 }

//go:build amd64 && !noasm

package encode

// The AVX2 kernel of scaleRef (scale_amd64.s). useAVX2 (transform_amd64.go)
// selects it, so the tests that turn the kernels off check the portable
// loop against it.

//go:noescape
func scale32AVX2(dst, ref *byte, n int, f float32)

// simdScale32 scales the leading multiple of 8 of the n float32 elements
// of ref into dst and returns how many it did (0: the caller does them all).
func simdScale32(dst, ref []byte, n int, f float32) int {
	n8 := n &^ 7
	if !useAVX2 || n8 == 0 {
		return 0
	}
	_ = dst[4*n8-1]
	_ = ref[4*n8-1]
	scale32AVX2(&dst[0], &ref[0], n8, f)
	return n8
}

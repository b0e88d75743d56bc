//go:build !amd64 || noasm

package encode

var useRouteAVX2 = false

func routeKernels(w int, t uint, k int) bool { return false }

func countGroups(w int, ref, plain, mask []byte, n8, how int, thr *[4]int32) (cnt [4]int) {
	panic("encode: no routing kernels")
}

func routeWords(w int, z, plain, ref, mask []byte, n8 int, mode planeMode, thr *[4]int32, cur *[4]int) {
	panic("encode: no routing kernels")
}

func unrouteWords(w int, out, z, ref, mask []byte, n8 int, mode planeMode, thr *[4]int32, cur *[4]int) {
	panic("encode: no routing kernels")
}

package chain

import (
	"math/bits"
	"sync"
)

// bufPool recycles the byte buffers of the hot paths (encoded chunks,
// pages read from the device) by power-of-two size class, so that streaming
// gigabytes does not allocate, zero and collect a buffer per chunk.
var bufPool [28]sync.Pool // classes 2^0 .. 2^27 bytes

func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// getBuf returns a buffer of length n; its contents are arbitrary.
func getBuf(n int) []byte {
	c := sizeClass(n)
	if c >= len(bufPool) {
		return make([]byte, n)
	}
	if p, ok := bufPool[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf returns a buffer obtained from getBuf (or any buffer whose
// capacity is a power of two); nothing may use it afterwards.
func putBuf(b []byte) {
	c := cap(b)
	if c == 0 || c&(c-1) != 0 || sizeClass(c) >= len(bufPool) {
		return
	}
	b = b[:0]
	bufPool[sizeClass(c)].Put(&b)
}

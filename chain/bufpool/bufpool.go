// Package bufpool recycles the byte buffers of the hot paths.
package bufpool

import (
	"math/bits"
	"sync"
)

// Byte buffers of the hot paths (chunk buffers, encoded chunks, pages read
// from the device) are recycled by power-of-two size class, so that
// streaming gigabytes does not allocate, page-fault and collect a buffer per
// chunk. Large classes keep an explicit free list, bounded in bytes: a
// sync.Pool is emptied at every collection, and under the heap limit
// collections are frequent. Small classes use a sync.Pool.
const (
	largeClass   = 16       // 64 KiB and up
	maxClass     = 27       // 128 MiB
	freeListKeep = 24 << 20 // bytes kept on the large free lists
)

var (
	smallPool [largeClass]sync.Pool

	freeMu    sync.Mutex
	freeLists [maxClass + 1][][]byte
	freeBytes int
)

func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// Get returns a buffer of length n; its contents are arbitrary.
func Get(n int) []byte {
	c := sizeClass(n)
	switch {
	case c > maxClass:
		return make([]byte, n)
	case c < largeClass:
		if p, ok := smallPool[c].Get().(*[]byte); ok {
			return (*p)[:n]
		}
	default:
		freeMu.Lock()
		if l := freeLists[c]; len(l) > 0 {
			b := l[len(l)-1]
			freeLists[c] = l[:len(l)-1]
			freeBytes -= cap(b)
			freeMu.Unlock()
			return b[:n]
		}
		freeMu.Unlock()
	}
	return make([]byte, n, 1<<c)
}

// Put returns a buffer obtained from Get (or any buffer whose
// capacity is a power of two); nothing may use it afterwards.
func Put(b []byte) {
	c := cap(b)
	if c == 0 || c&(c-1) != 0 || sizeClass(c) > maxClass {
		return
	}
	class := sizeClass(c)
	if class < largeClass {
		b = b[:0]
		smallPool[class].Put(&b)
		return
	}
	freeMu.Lock()
	defer freeMu.Unlock()
	if freeBytes+c > freeListKeep {
		return // the collector takes it
	}
	freeLists[class] = append(freeLists[class], b[:0])
	freeBytes += c
}

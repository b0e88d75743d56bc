package chain

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkColdRead reads a 2 MiB checkpoint at each chain depth in 1 MiB
// calls, as the kernel's read-ahead asks, with the read cache emptied
// first: the decode cost of the chain, spread over the workers.
func BenchmarkColdRead(b *testing.B) {
	ds, files, ids := deepSeries(b, 7)
	defer ds.Close()
	buf := make([]byte, 1<<20)
	for depth := 0; depth < len(ids)-1; depth++ { // the newest is in the tier
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			b.SetBytes(int64(len(files[depth])))
			for b.Loop() {
				ds.DropCaches()
				r, err := ds.OpenVersion(ids[depth])
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); ; {
					n, err := r.ReadAt(buf, off)
					off += int64(n)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

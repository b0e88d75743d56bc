package detect

import (
	"fmt"
	"testing"

	"github.com/ckptfs/ckptfs/encode/pickle/pickletest"
)

// BenchmarkPickleReader reads a large data.pkl (50,000 tensors, ~8 MB) as
// the zip machine does on every save: in 1 MiB and 4 KiB pieces.
func BenchmarkPickleReader(b *testing.B) {
	const n = 50000
	p := pickletest.StateDict(n)
	for _, piece := range []int{1 << 20, 4 << 10} {
		b.Run(fmt.Sprintf("piece=%d", piece), func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := newPickleReader()
				for q := p; len(q) > 0 && !r.done; {
					k := r.feed(q[:min(piece, len(q))])
					q = q[k:]
				}
				if !r.done || len(r.order) != n {
					b.Fatalf("done %v, %d storages", r.done, len(r.order))
				}
			}
		})
	}
}

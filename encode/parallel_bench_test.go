package encode

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkPipeline encodes (planes) the adam delta chunks with 1 and 2
// workers, and decodes them: the scaling of the ingest and read paths (the
// store's worker pool runs chunks the same way, each worker taking the next
// chunk). MB/s is wall-clock throughput. Output buffers are recycled, as a
// store would, so allocation does not dominate.
func BenchmarkPipeline(b *testing.B) {
	s := loadSeries(b, "adam", "fp32", Float32)
	pairs := s.deltaPairs()
	plain := 0
	for _, p := range pairs {
		plain += len(p.plain)
	}
	for _, op := range []string{"enc", "dec"} {
		var chunks [][]byte
		if op == "dec" {
			for _, p := range pairs {
				c, _ := Encode(nil, Planes, Float32, p.plain, p.ref)
				chunks = append(chunks, c)
			}
		}
		bufs := make([][]byte, len(pairs))
		for i, p := range pairs {
			bufs[i] = make([]byte, 0, len(p.plain)+1024)
		}
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", op, workers), func(b *testing.B) {
				b.SetBytes(int64(plain))
				for b.Loop() {
					var next atomic.Int64
					var wg sync.WaitGroup
					errs := make([]error, workers)
					for w := range workers {
						wg.Go(func() {
							for i := int(next.Add(1) - 1); i < len(pairs); i = int(next.Add(1) - 1) {
								var err error
								if op == "dec" {
									_, err = Decode(bufs[i][:0], chunks[i], pairs[i].ref)
								} else {
									_, err = Encode(bufs[i][:0], Planes, Float32, pairs[i].plain, pairs[i].ref)
								}
								if err != nil {
									errs[w] = err
									return
								}
							}
						})
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

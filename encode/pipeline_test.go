package encode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

func TestPipelineOrderAndRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var plains, refs [][]byte
	for i := 0; i < 200; i++ {
		n := rng.IntN(20000)
		p, r := make([]byte, n), make([]byte, n)
		for k := range p {
			r[k] = byte(rng.IntN(256))
			p[k] = r[k] + byte(rng.IntN(3))
		}
		plains, refs = append(plains, p), append(refs, r)
	}
	enc := NewPipeline(3, 8)
	go func() {
		for i, p := range plains {
			c := Codecs()[i%numCodecs]
			if err := enc.Submit(context.Background(), Job{Codec: c, DType: Float32, Data: p, Ref: refs[i], Tag: i}); err != nil {
				t.Error(err)
			}
		}
		enc.Close()
	}()
	var chunks [][]byte
	for r := range enc.Results() {
		if r.Err != nil || r.Tag.(int) != len(chunks) {
			t.Fatalf("result %d: tag %v err %v", len(chunks), r.Tag, r.Err)
		}
		chunks = append(chunks, r.Out)
	}
	if len(chunks) != len(plains) {
		t.Fatalf("%d results for %d jobs", len(chunks), len(plains))
	}
	dec := NewPipeline(2, 4)
	go func() {
		for i, c := range chunks {
			dec.Submit(context.Background(), Job{Decode: true, Data: c, Ref: refs[i], Tag: i})
		}
		dec.Close()
	}()
	i := 0
	for r := range dec.Results() {
		if r.Err != nil || !bytes.Equal(r.Out, plains[i]) {
			t.Fatalf("decode %d: %v", i, r.Err)
		}
		i++
	}
	if err := dec.Submit(context.Background(), Job{}); !errors.Is(err, ErrPipelineClosed) {
		t.Fatalf("submit after close: %v", err)
	}
}

// Submit must block once inFlight results are undelivered, and a cancelled
// context must release it.
func TestPipelineBackpressure(t *testing.T) {
	p := NewPipeline(2, 3)
	defer p.Close()
	var submitted atomic.Int32
	for i := 0; i < 3; i++ {
		if err := p.Submit(context.Background(), Job{Codec: Stored, Data: []byte{1}}); err != nil {
			t.Fatal(err)
		}
		submitted.Add(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Submit(ctx, Job{Codec: Stored, Data: []byte{1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("4th submit with 3 undelivered: %v, want deadline exceeded", err)
	}
	<-p.Results()
	if err := p.Submit(context.Background(), Job{Codec: Stored, Data: []byte{1}}); err != nil {
		t.Fatalf("submit after a result was taken: %v", err)
	}
}

// BenchmarkPipeline encodes (planes) the adam delta chunks with 1 and 2
// workers, and decodes them: the scaling of the ingest and read paths. MB/s
// is wall-clock throughput of the whole pipeline. Output buffers are
// recycled, as a store would, so allocation does not dominate.
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
					p := NewPipeline(workers, 4*workers)
					go func() {
						for i, c := range pairs {
							j := Job{Codec: Planes, DType: Float32, Data: c.plain, Ref: c.ref, Dst: bufs[i][:0]}
							if op == "dec" {
								j = Job{Decode: true, Data: chunks[i], Ref: c.ref, Dst: bufs[i][:0]}
							}
							p.Submit(context.Background(), j)
						}
						p.Close()
					}()
					for r := range p.Results() {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
				}
			})
		}
	}
}

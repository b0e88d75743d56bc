package encode

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrPipelineClosed is returned by Submit after Close.
var ErrPipelineClosed = errors.New("pipeline closed")

// Job is one independent chunk for a Pipeline: encode Data (plain bytes)
// with Codec and DType, or, with Decode set, decode Data (a chunk). Ref is
// the reference as for Encode/Decode. The result is appended to Dst (which
// may be nil). Tag is the caller's, returned untouched with the result.
type Job struct {
	Decode bool
	Codec  Codec
	DType  DType
	Data   []byte
	Ref    []byte
	Dst    []byte
	Tag    any
}

// Result is a finished Job: Out is Dst with the encoded chunk or the plain
// bytes appended, or Err says why not.
type Result struct {
	Tag any
	Out []byte
	Err error
}

// Pipeline encodes and decodes independent chunks on a fixed set of
// workers, each with its own Coder, and delivers results in submission
// order. At most inFlight jobs are submitted but not yet received from
// Results: Submit blocks beyond that, so a producer streaming a large file
// through it holds bounded memory.
//
// Results must be drained by another goroutine than the one blocked in
// Submit (or between Submits), else a full pipeline waits for itself.
type Pipeline struct {
	mu      sync.Mutex
	closed  bool
	slots   chan struct{} // one token per job not yet delivered
	work    chan *pipeTask
	order   chan *pipeTask
	results chan Result
	wg      sync.WaitGroup
}

type pipeTask struct {
	job  Job
	res  Result
	done chan struct{}
}

// NewPipeline starts workers goroutines (at least 1) and allows inFlight
// undelivered jobs (at least workers).
func NewPipeline(workers, inFlight int) *Pipeline {
	workers = max(workers, 1)
	inFlight = max(inFlight, workers)
	p := &Pipeline{
		slots:   make(chan struct{}, inFlight),
		work:    make(chan *pipeTask, inFlight),
		order:   make(chan *pipeTask, inFlight),
		results: make(chan Result),
	}
	p.wg.Add(workers)
	for range workers {
		go p.worker()
	}
	go p.deliver()
	return p
}

func (p *Pipeline) worker() {
	defer p.wg.Done()
	cd := NewCoder()
	for t := range p.work {
		j := t.job
		var out []byte
		var err error
		if j.Decode {
			out, err = cd.Decode(j.Dst, j.Data, j.Ref)
		} else {
			out, err = cd.Encode(j.Dst, j.Codec, j.DType, j.Data, j.Ref)
		}
		t.res = Result{Tag: j.Tag, Out: out, Err: err}
		close(t.done)
	}
}

// deliver hands results out in submission order; a slot is freed only when
// the consumer has taken the result.
func (p *Pipeline) deliver() {
	for t := range p.order {
		<-t.done
		p.results <- t.res
		<-p.slots
	}
	close(p.results)
}

// Submit queues a job, waiting while inFlight jobs are undelivered. It
// fails with ctx's error if ctx ends first, and with ErrPipelineClosed
// after Close.
func (p *Pipeline) Submit(ctx context.Context, j Job) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("pipeline submit: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		<-p.slots
		return fmt.Errorf("pipeline submit: %w", ErrPipelineClosed)
	}
	t := &pipeTask{job: j, done: make(chan struct{})}
	// Both channels have room: a slot was taken above.
	p.order <- t
	p.work <- t
	return nil
}

// Results delivers one Result per submitted Job, in submission order, and
// is closed after Close once every result has been delivered.
func (p *Pipeline) Results() <-chan Result { return p.results }

// Close ends submission. Workers finish the queued jobs; Results closes
// after the last one is delivered. Close is idempotent.
func (p *Pipeline) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.work)
	close(p.order)
}

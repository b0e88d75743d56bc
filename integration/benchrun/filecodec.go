package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/encode/cputime"
	"github.com/ckptfs/ckptfs/encode/detect"
)

// The store's default cut (chain/policy.DefaultLayout): tensors in chunks
// of 64 Ki elements, raw ranges in chunks of 256 KiB.
const (
	fileChunkElems = 64 << 10
	fileRawChunk   = 256 << 10
)

// fileChunk is one chunk of a checkpoint file as the store cuts it: a
// tensor's chunk (keyed so that the next version's same chunk finds it) or
// a raw range, coded as the store codes raw bytes for the codec
// (policy.RawCodec: zstd for planes, stored for the paper's DynRLE) and
// never as a delta.
type fileChunk struct {
	key    string
	dt     encode.DType
	tensor bool
	plain  []byte
	ref    []byte // the previous version's chunk with the same key, if any
}

// cutFile labels data as the store's detector does and cuts it into chunks.
func cutFile(name string, data []byte) []fileChunk {
	d := detect.New(filepath.Base(name))
	spans := detect.Merge(nil, d.Label(nil, data))
	var out []fileChunk
	for _, s := range spans {
		step := int64(fileRawChunk)
		if s.Kind == detect.Tensor {
			step = int64(fileChunkElems * s.DType.Width())
		}
		for off := s.Offset; off < s.End(); off += step {
			n := min(step, s.End()-off)
			c := fileChunk{dt: encode.Bytes, plain: data[off : off+n]}
			if s.Kind == detect.Tensor {
				c.tensor, c.dt = true, s.DType
				c.key = fmt.Sprintf("%s#%d", s.Key, (off-s.Offset)/step)
			}
			out = append(out, c)
		}
	}
	return out
}

var digits = regexp.MustCompile(`[0-9]+`)

// seriesChunks cuts every file of a series and, for delta coding, gives each
// tensor chunk the previous version's chunk of the same key and length (the
// previous version is the last earlier file whose path differs only in its
// digits: ckpt-000128.pt before ckpt-000256.pt, 3/checkpoint-150/optimizer.pt
// before 4/checkpoint-200/optimizer.pt).
func seriesChunks(files []string) ([]fileChunk, int64, error) {
	last := map[string]map[string][]byte{}
	var all []fileChunk
	var plain int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		plain += int64(len(data))
		fam := digits.ReplaceAllString(f, "N")
		prev, cur := last[fam], map[string][]byte{}
		for _, c := range cutFile(f, data) {
			if c.tensor {
				if r := prev[c.key]; len(r) == len(c.plain) {
					c.ref = r
				}
				cur[c.key] = c.plain
			}
			all = append(all, c)
		}
		last[fam] = cur
	}
	return all, plain, nil
}

// codecRun is one codec over a series' chunks.
type codecRun struct {
	Encoded   int64   `json:"encoded_bytes"` // chunk headers included
	DeltaFrac float64 `json:"delta_fraction"`
	EncCPU    float64 `json:"enc_cpu_s"` // one thread, thread CPU time
	DecCPU    float64 `json:"dec_cpu_s"`
	EncWall2  float64 `json:"enc_wall_s_2_workers"` // two workers, wall clock
	DecWall2  float64 `json:"dec_wall_s_2_workers"`
}

// runFileCodec codes chunks with codec c, as deltas where delta is set and
// a chunk has a reference, else as baselines; raw chunks with c's raw codec.
// Every chunk is decoded and compared.
func runFileCodec(chunks []fileChunk, c encode.Codec, delta bool) (*codecRun, error) {
	refOf := func(ch *fileChunk) []byte {
		if delta && ch.tensor {
			return ch.ref
		}
		return nil
	}
	raw := policy.Policy{Codec: c}.RawCodec()
	codecOf := func(ch *fileChunk) encode.Codec {
		if ch.tensor {
			return c
		}
		return raw
	}
	enc := make([][]byte, len(chunks))
	dec := make([][]byte, len(chunks))
	r := &codecRun{}
	var err error
	// An untimed pass first: it allocates the output buffers and the
	// Coder's scratch, which would otherwise be charged to the first codec
	// of each series.
	warm := encode.NewCoder()
	for i := range chunks {
		ch := &chunks[i]
		if enc[i], err = warm.Encode(enc[i][:0], codecOf(ch), ch.dt, ch.plain, refOf(ch)); err != nil {
			return nil, fmt.Errorf("encode %s: %w", c, err)
		}
	}
	r.EncCPU = cputime.Thread(func() {
		cd := warm
		for i := range chunks {
			ch := &chunks[i]
			if enc[i], err = cd.Encode(enc[i][:0], codecOf(ch), ch.dt, ch.plain, refOf(ch)); err != nil {
				return
			}
		}
	}).Seconds()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c, err)
	}
	var deltaBytes, plain int64
	for i := range chunks {
		r.Encoded += int64(len(enc[i]))
		plain += int64(len(chunks[i].plain))
		if h, err := encode.Inspect(enc[i]); err == nil && h.Delta {
			deltaBytes += int64(len(chunks[i].plain))
		}
		dec[i] = make([]byte, 0, len(chunks[i].plain))
	}
	if plain > 0 {
		r.DeltaFrac = float64(deltaBytes) / float64(plain)
	}
	r.DecCPU = cputime.Thread(func() {
		cd := warm
		for i := range chunks {
			if dec[i], err = cd.Decode(dec[i][:0], enc[i], refOf(&chunks[i])); err != nil {
				return
			}
		}
	}).Seconds()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", c, err)
	}
	for i := range chunks {
		if string(dec[i]) != string(chunks[i].plain) {
			return nil, fmt.Errorf("%s: chunk %d does not round-trip", c, i)
		}
	}
	start := time.Now()
	if err := parallel(2, len(chunks), func(cd *encode.Coder, i int) (err error) {
		enc[i], err = cd.Encode(enc[i][:0], codecOf(&chunks[i]), chunks[i].dt, chunks[i].plain, refOf(&chunks[i]))
		return err
	}); err != nil {
		return nil, err
	}
	r.EncWall2 = since(start)
	start = time.Now()
	if err := parallel(2, len(chunks), func(cd *encode.Coder, i int) (err error) {
		dec[i], err = cd.Decode(dec[i][:0], enc[i], refOf(&chunks[i]))
		return err
	}); err != nil {
		return nil, err
	}
	r.DecWall2 = since(start)
	return r, nil
}

// parallel runs f on n items with the given number of workers, one Coder
// each, each worker taking the next item (as the store's worker pool does).
func parallel(workers, n int, f func(*encode.Coder, int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			cd := encode.NewCoder()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(cd, i); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

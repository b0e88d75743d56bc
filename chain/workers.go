package chain

import (
	"bytes"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// chunkJob encodes one chunk: fetch the reference chunk's plain bytes (a
// rebuild, possibly through a chain of deltas), then encode against it.
// Jobs of all ingests share the store's workers; each ingest collects its
// own jobs in submission order.
type chunkJob struct {
	codec  encode.Codec
	dtype  encode.DType
	plain  []byte
	refVer meta.VersionID // 0: baseline
	refOff int64
	// takeRef: the reference will not be wanted again (progressive), so
	// it leaves the reference tier when used.
	takeRef bool
	// refMap, if set, turns the reference's plain bytes into those the
	// delta is taken against (a lossy re-code whose reference is re-coded
	// lossy in the same transaction: chain/recode.go).
	refMap func(dst, src []byte)

	done      chan struct{}
	enc       []byte
	delta     bool // encoded against the reference
	unchanged bool // identical to the reference
	err       error
}

// storedOverhead is what the stored codec adds to a chunk: its header.
var storedOverhead = func() int {
	enc, _ := encode.Encode(nil, encode.Stored, encode.Bytes, nil, nil)
	return len(enc)
}()

func (s *Store) startWorkers() {
	jobs := make(chan *chunkJob, s.workers)
	s.jobs = jobs
	for i := 0; i < s.workers; i++ {
		go func() {
			defer s.lowerPriority()()
			for j := range jobs {
				s.runJob(j)
				close(j.done)
			}
		}()
	}
}

func (s *Store) runJob(j *chunkJob) {
	var ref []byte
	if j.refVer != 0 {
		r, ok := s.refs.Get(plaincache.Key{V: j.refVer, Off: j.refOff}, j.takeRef)
		// A reference taken from the tier, or rebuilt for this job,
		// belongs to this job alone.
		owned := ok && j.takeRef
		var err error
		if !ok {
			r, owned, err = s.referencePlain(j.refVer, j.refOff)
		}
		if owned {
			defer bufpool.Put(r)
		}
		switch {
		case err != nil:
			// A damaged reference must not stop the save: a baseline is
			// always correct, only larger.
			logrus.WithError(err).Warnf("reference chunk %d@%d unreadable: storing a baseline", j.refVer, j.refOff)
		case len(r) != len(j.plain):
			logrus.Warnf("reference chunk %d@%d has %d bytes, want %d: storing a baseline", j.refVer, j.refOff, len(r), len(j.plain))
		case j.refMap != nil:
			mapped := bufpool.Get(len(r))[:len(r)]
			j.refMap(mapped, r)
			defer bufpool.Put(mapped)
			ref = mapped
		default:
			ref = r
		}
	}
	enc, err := encode.Encode(bufpool.Get(len(j.plain) + 64)[:0], j.codec, j.dtype, j.plain, ref)
	if err != nil {
		j.err = fmt.Errorf("encode %s chunk: %w", j.codec, err)
		return
	}
	// Tiny or random chunks can grow when coded: never store more than
	// the plain bytes and a header.
	if len(enc) > len(j.plain)+storedOverhead && j.codec != encode.Stored {
		if enc, err = encode.Encode(enc[:0], encode.Stored, j.dtype, j.plain, nil); err != nil {
			j.err = fmt.Errorf("encode stored chunk: %w", err)
			return
		}
	}
	// A codec may store a baseline even when given a reference (a delta
	// that does not pay): the chunk depends on its reference only if the
	// encoded form says so.
	h, err := encode.Inspect(enc)
	if err != nil {
		j.err = fmt.Errorf("inspect encoded chunk: %w", err)
		return
	}
	j.enc = enc
	j.delta = h.Delta
	j.unchanged = h.Delta && bytes.Equal(ref, j.plain)
}

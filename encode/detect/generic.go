package detect

import (
	"strconv"

	"github.com/ckptfs/ckptfs/encode"
)

// genericChunk is the size of the ranges the generic labelling cuts a stream
// into. Ranges are aligned to absolute stream offsets, so a rewritten file
// whose layout did not move deltas range by range against its previous
// version, and a fallback that happens at the same offset in two versions
// yields the same keys.
const genericChunk = 1 << 20

// generic labels every byte as a Bytes tensor keyed "generic/<index>", where
// index is the stream offset divided by genericChunk.
type generic struct{}

func (generic) feed(e *emitter, p []byte) (int, bool) {
	n := len(p)
	for len(p) > 0 {
		idx := e.pos / genericChunk
		k := min(int64(len(p)), (idx+1)*genericChunk-e.pos)
		e.emit(genericLabel(idx), k, e.pos%genericChunk == 0)
		p = p[k:]
	}
	return n, false
}

func (generic) format() string { return "generic" }

func (generic) layout() Layout { return Layout{} }

func genericLabel(idx int64) Label {
	return Label{Kind: Tensor, Key: "generic/" + strconv.FormatInt(idx, 10), DType: encode.Bytes}
}

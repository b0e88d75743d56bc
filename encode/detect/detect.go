// Package detect labels the bytes of a checkpoint file, as they stream in
// through write(), with the ranges the store codes differently: raw bytes
// (headers, pickles, padding, protobuf tags) and float tensors, each under a
// key that names the same tensor in the previous checkpoint of the same model.
//
// A Detector never changes a byte and never holds one back: every byte passed
// to Label is labelled before Label returns. That works because headers are
// always labelled raw; only bytes after a fully parsed header become tensor
// bytes. A stream that stops matching its format falls back to the generic
// labelling (fixed, offset-keyed ranges) for the rest: a wrong label costs
// compression, never correctness, because the store codes every range
// losslessly whatever its label says.
package detect

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/encode"
)

// Kind says whether a range is raw bytes or a tensor.
type Kind uint8

const (
	// Raw ranges are coded on their own (zstd): headers, pickles, padding.
	Raw Kind = iota
	// Tensor ranges are delta-coded against the range with the same Key in
	// the reference version.
	Tensor
)

func (k Kind) String() string {
	switch k {
	case Raw:
		return "raw"
	case Tensor:
		return "tensor"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// Label is what a range is. Key and DType are empty for Raw.
type Label struct {
	Kind  Kind
	Key   string
	DType encode.DType
}

var rawLabel = Label{Kind: Raw}

func (l Label) String() string {
	if l.Kind == Raw {
		return "raw"
	}
	return fmt.Sprintf("tensor{%s,%s}", l.Key, l.DType)
}

// Span labels Length bytes of the stream starting at Offset. Region is the
// stream offset where the labelled region (the whole tensor, or the whole run
// of raw bytes) begins: a region that arrives over several Label calls comes
// back as several spans with the same Label and Region, contiguous.
type Span struct {
	Label
	Offset int64
	Length int64
	Region int64
}

// End is the stream offset just past the span.
func (s Span) End() int64 { return s.Offset + s.Length }

func (s Span) String() string {
	return fmt.Sprintf("[%d,%d) %s region %d", s.Offset, s.End(), s.Label, s.Region)
}

// Detector labels a byte stream as it is written.
type Detector interface {
	// Label appends to dst spans that label p, the next len(p) bytes of the
	// stream, and returns dst. The spans cover p exactly and in order: every
	// byte passed in is labelled before Label returns (nothing is held back),
	// so the caller never buffers for the detector.
	Label(dst []Span, p []byte) []Span
	// Format names what was detected so far: "torch-zip", "torch-legacy",
	// "safetensors", "npy", "npz", "zip", "dcp", "caffe", "generic", or "unknown"
	// while the first bytes are still being sniffed. A format that stopped
	// matching and fell back gets "+generic" appended. A file of several
	// torch archives (torch.distributed.checkpoint's .distcp) is "dcp".
	Format() string
	// Layout is the tensor layout the stream declared so far (a header or a
	// pickle that precedes the data). Once Label has returned a Tensor span,
	// Layout covers everything the format declares up front. Of a file of
	// several archives it describes the first archive's declaration only.
	Layout() Layout
}

// Layout is what a file declares of its tensors before their bytes.
type Layout struct {
	Sum     uint64 // fingerprint of (key, dtype, byte length) of each declared tensor, in declaration order
	Tensors int    // tensors declared; 0: the format declared none (unknown layout)
}

// Known reports whether the file declared its tensors up front.
func (l Layout) Known() bool { return l.Tensors > 0 }

// New returns a detector for a file whose base name is name. The name is
// only a hint: most formats are recognised by their magic bytes, but Caffe's
// .caffemodel and .solverstate have none.
func New(name string) Detector {
	return newDispatcher(name)
}

// Merge appends to dst the ranges that spans describe: adjacent spans with the
// same Label and Region are joined into one. Spans from consecutive Label
// calls may be passed together.
func Merge(dst []Span, spans []Span) []Span {
	start := len(dst)
	for _, s := range spans {
		if s.Length == 0 {
			continue
		}
		if n := len(dst); n > start {
			last := &dst[n-1]
			if last.Label == s.Label && last.Region == s.Region && last.End() == s.Offset {
				last.Length += s.Length
				continue
			}
		}
		dst = append(dst, s)
	}
	return dst
}

// hasSuffixFold reports whether name ends in suffix, ignoring ASCII case.
func hasSuffixFold(name, suffix string) bool {
	return len(name) >= len(suffix) && strings.EqualFold(name[len(name)-len(suffix):], suffix)
}

package detect

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
)

// layoutSum accumulates a Layout. The fingerprint is stored on disk, so it
// must not change across processes or Go versions: FNV-1a 64 over, for each
// tensor, the length-prefixed key, the length-prefixed dtype name and the
// byte length, all lengths as 8-byte little-endian.
type layoutSum struct {
	h hash.Hash64
	n int
}

// add declares a tensor labelled l of size bytes (-1 if unknowable).
func (s *layoutSum) add(l Label, size int64) {
	if s.h == nil {
		s.h = fnv.New64a()
	}
	var b [8]byte
	field := func(v string) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(v)))
		s.h.Write(b[:])
		s.h.Write([]byte(v))
	}
	field(l.Key)
	field(l.DType.String())
	binary.LittleEndian.PutUint64(b[:], uint64(size))
	s.h.Write(b[:])
	s.n++
}

func (s *layoutSum) layout() Layout {
	if s.n == 0 {
		return Layout{}
	}
	return Layout{Sum: s.h.Sum64(), Tensors: s.n}
}

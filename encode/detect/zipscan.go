package detect

import (
	"bytes"
	"encoding/binary"
)

// descScanner finds where a zip record of unknown size ends: at a data
// descriptor PK\x07\x08 whose compressed-size field equals the number of data
// bytes before it, followed by the next record's signature. Both the 16-byte
// form (32-bit sizes) and the zip64 24-byte form are accepted.
//
// The scanner never holds bytes back: it keeps a copy of the last few bytes it
// was shown (descTail) so a descriptor cut by a piece boundary is still found,
// and a candidate that cannot be decided yet (its lookahead has not arrived)
// is decided on a later call. A decided candidate always ends before any
// undecided one, so the earliest end found is the same whatever the piece
// sizes.
type descScanner struct {
	dataStart int64 // stream offset of the record's first data byte
	tail      [descTail]byte
	tailN     int
	tailPos   int64 // stream offset of tail[0]
}

const (
	desc32    = 16
	desc64    = 24
	descAhead = 4                      // bytes of the next signature checked after a descriptor
	descTail  = desc64 + descAhead - 1 // bytes a candidate may reach back over a piece boundary
)

var descSig = []byte("PK\x07\x08")

// reset starts a scan at stream offset pos for the record whose data began at
// dataStart; candidates before pos are not considered.
func (s *descScanner) reset(dataStart, pos int64) {
	s.dataStart, s.tailN, s.tailPos = dataStart, 0, pos
}

// find returns the stream offset where the earliest descriptor seen so far
// ends, considering the bytes already shown plus p (which starts at stream
// offset pos), or -1. The end may lie up to descAhead-1 bytes before pos.
func (s *descScanner) find(p []byte, pos int64) int64 {
	best := int64(-1)
	if s.tailN > 0 {
		var w [descTail + desc64 + descAhead]byte
		n := copy(w[:], s.tail[:s.tailN])
		n += copy(w[n:], p)
		for i := 0; i < s.tailN; i++ {
			if e := s.at(w[:n], i, s.tailPos+int64(i)); e >= 0 && (best < 0 || e < best) {
				best = e
			}
		}
	}
	// A candidate can only win if it starts desc32 bytes before the best end
	// so far: stop searching there rather than at the end of p.
	end := len(p)
	bound := func() {
		if best >= 0 {
			end = min(end, max(0, int(best-pos)-desc32+len(descSig)-1))
		}
	}
	bound()
	for i := 0; i < end; i++ {
		j := bytes.Index(p[i:end], descSig)
		if j < 0 {
			break
		}
		i += j
		if e := s.at(p, i, pos+int64(i)); e >= 0 && (best < 0 || e < best) {
			best = e
			bound()
		}
	}
	return best
}

// at decides the candidate signature at w[i], stream offset at: it returns
// the descriptor's end offset, or -1 (no descriptor, or not decidable yet).
func (s *descScanner) at(w []byte, i int, at int64) int64 {
	if !bytes.HasPrefix(w[i:], descSig) {
		return -1
	}
	size := at - s.dataStart
	if size < 0 {
		return -1
	}
	if size < 1<<32 && len(w)-i >= desc32+descAhead &&
		int64(binary.LittleEndian.Uint32(w[i+8:])) == size && nextRecord(w[i+desc32:]) {
		return at + desc32
	}
	if len(w)-i >= desc64+descAhead &&
		binary.LittleEndian.Uint64(w[i+8:]) == uint64(size) && nextRecord(w[i+desc64:]) {
		return at + desc64
	}
	return -1
}

// nextRecord reports whether b starts with a signature that may follow a
// record's data: another local header, the central directory, an end record.
func nextRecord(b []byte) bool {
	if len(b) < 4 || b[0] != 'P' || b[1] != 'K' {
		return false
	}
	switch string(b[2:4]) {
	case "\x03\x04", "\x01\x02", "\x05\x06", "\x06\x06", "\x06\x07", "\x05\x05", "\x06\x08":
		return true
	}
	return false
}

// advance records that the bytes p (which started at stream offset pos) have
// been consumed.
func (s *descScanner) advance(p []byte, pos int64) {
	if len(p) >= descTail {
		s.tailN = copy(s.tail[:], p[len(p)-descTail:])
		s.tailPos = pos + int64(len(p)-descTail)
		return
	}
	if drop := s.tailN + len(p) - descTail; drop > 0 {
		copy(s.tail[:], s.tail[drop:s.tailN])
		s.tailN -= drop
		s.tailPos += int64(drop)
	}
	if s.tailN == 0 {
		s.tailPos = pos
	}
	s.tailN += copy(s.tail[s.tailN:], p)
}

// tailFrom returns the consumed bytes from stream offset off on (off must be
// within the tail).
func (s *descScanner) tailFrom(off int64) []byte {
	return s.tail[off-s.tailPos : s.tailN]
}

package detect

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// Fixed parts of the records that follow an archive's members, by signature.
// Their variable parts (names, extra fields, comments) are skipped by the
// lengths the fixed part gives.
var tailFixed = map[string]int{
	"PK\x01\x02": 46, // central directory header
	"PK\x06\x06": 12, // zip64 end of central directory: signature and record size
	"PK\x06\x07": 20, // zip64 end of central directory locator
	"PK\x05\x06": 22, // end of central directory
	"PK\x05\x05": 6,  // digital signature
	"PK\x06\x08": 8,  // archive extra data
}

// startTail reads the 4-byte signature in z.hdr, the first record after an
// archive's members (or after another such record).
func (z *zipMachine) startTail() {
	sig := string(z.hdr[:4])
	if sig == sigLocal {
		// A local header where the directory should go on: a new archive
		// (not valid zip, but nothing else it can be).
		z.newArchive()
		return
	}
	n, ok := tailFixed[sig]
	if !ok {
		z.toSeek(z.hdr)
		return
	}
	z.st, z.need = zsTail, n
}

// tail labels central directory and end records raw while reading their
// lengths, so that it knows where the archive ends.
func (z *zipMachine) tail(e *emitter, p []byte) int {
	if z.st == zsSkip {
		k := min(int64(len(p)), z.skip)
		e.raw(k)
		if z.skip -= k; z.skip == 0 {
			z.endTailRecord()
		}
		return int(k)
	}
	k := min(z.need-len(z.hdr), len(p))
	z.hdr = append(z.hdr, p[:k]...)
	e.raw(int64(k))
	if len(z.hdr) == z.need {
		if z.need == 4 {
			z.startTail()
		} else {
			z.tailRecord()
		}
	}
	return k
}

// tailRecord reads a complete fixed part in z.hdr and skips the variable
// part; after the end of central directory record the archive is over.
func (z *zipMachine) tailRecord() {
	h := z.hdr
	u16 := func(at int) int64 { return int64(binary.LittleEndian.Uint16(h[at:])) }
	var skip int64
	after := zsTail
	switch string(h[:4]) {
	case "PK\x01\x02":
		skip = u16(28) + u16(30) + u16(32)
	case "PK\x06\x06":
		size := binary.LittleEndian.Uint64(h[4:]) // bytes after this field
		if size < 44 || size > 1<<40 {
			z.toSeek(h) // not a zip64 end record after all
			return
		}
		skip = int64(size)
	case "PK\x05\x06":
		skip, after = u16(20), zsSeek
	case "PK\x05\x05":
		skip = u16(4)
	case "PK\x06\x08":
		skip = int64(binary.LittleEndian.Uint32(h[4:]))
	}
	z.skip, z.afterSkip, z.st = skip, after, zsSkip
	if skip == 0 {
		z.endTailRecord()
	}
}

func (z *zipMachine) endTailRecord() {
	z.st, z.hdr, z.need = z.afterSkip, z.hdr[:0], 4
	if z.st == zsSeek {
		z.seek = sigSeeker{}
	}
}

// toSeek gives up on the current record: the bytes up to the next local
// header signature are raw. consumed are the last bytes already labelled,
// which may hold the start of that signature.
func (z *zipMachine) toSeek(consumed []byte) {
	z.seek.prime(consumed)
	z.st, z.hdr, z.need = zsSeek, z.hdr[:0], 4
}

// seekArchive labels raw bytes until a local header signature completes,
// then starts the next archive with it.
func (z *zipMachine) seekArchive(e *emitter, p []byte) int {
	end := z.seek.find(p)
	if end < 0 {
		e.raw(int64(len(p)))
		return len(p)
	}
	e.raw(int64(end))
	z.newArchive()
	return end
}

// newArchive starts an archive whose local header signature has just been
// read, with fresh per-archive state.
func (z *zipMachine) newArchive() {
	z.archive++
	z.pk = nil
	z.hdr = append(z.hdr[:0], sigLocal...)
	z.st, z.need = zsHeader, zipLocalSz
}

// keyPrefix is what the keys of the current archive start with: nothing in
// the first (today's keys), "<k>/" in the k-th after it, so keys are unique
// within a file and the same for the same item of the next save.
func (z *zipMachine) keyPrefix() string {
	if z.archive == 0 {
		return ""
	}
	return strconv.Itoa(z.archive) + "/"
}

// declareStorages adds the storages of the first archive's pickle to its
// layout, keyed as their spans will be.
func (z *zipMachine) declareStorages(r *pickleReader) {
	for _, key := range r.order {
		info := r.storages[key]
		l := info.length()
		z.lay.add(tensorLabel("data/"+key, info.elem.dtype, l), l)
	}
}

func (z *zipMachine) layout() Layout { return z.lay.layout() }

// sigSeeker finds a local header signature in a stream shown in pieces: m
// is how many of its bytes the bytes seen so far end with.
type sigSeeker struct{ m int }

// find returns the index in p just past the first signature that completes
// in p, or -1.
func (s *sigSeeker) find(p []byte) int {
	i := 0
	if s.m > 0 {
		for s.m < len(sigLocal) && i < len(p) && p[i] == sigLocal[s.m] {
			s.m++
			i++
		}
		if s.m == len(sigLocal) {
			s.m = 0
			return i
		}
		if i == len(p) {
			return -1
		}
		// The partial match broke. The bytes it covered hold no 'P' (the
		// signature's only one is its first byte), so no match starts there.
		s.m = 0
	}
	if j := bytes.Index(p[i:], zipMagic); j >= 0 {
		return i + j + len(sigLocal)
	}
	s.prime(p[i:])
	return -1
}

// prime sets m from the last bytes of b.
func (s *sigSeeker) prime(b []byte) {
	s.m = 0
	for k := min(len(sigLocal)-1, len(b)); k > 0; k-- {
		if string(b[len(b)-k:]) == sigLocal[:k] {
			s.m = k
			return
		}
	}
}

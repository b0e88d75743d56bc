package detect

import (
	"encoding/binary"
	"strings"
)

// zipMachine walks a zip archive record by record: torch.save's archives,
// NumPy's .npz, or any other zip. Headers, descriptors and the central
// directory are raw; what a member's data is depends on its name:
//
//   - <archive>/data.pkl (torch): raw, read by a pickleReader that learns each
//     storage's dtype and element count;
//   - <archive>/data/<key> (torch): one tensor keyed "data/<key>" (the archive
//     prefix differs per file, so it is dropped);
//   - <name>.npy, stored (npz): an .npy, its array keyed by the member name;
//   - anything else, or compressed: raw.
//
// After the central directory and the end records the machine looks for
// another archive: torch.distributed.checkpoint (dcp.save) writes a .distcp
// file as a concatenation of items, each tensor a complete torch.save
// archive, with byte items (raw, or archives themselves) between them. The
// bytes up to the next local header signature are raw; the next archive is
// parsed afresh, its keys prefixed "<k>/" (k = its index in the file, from 0;
// the first archive keeps bare keys, which stores already depend on).
//
// torch writes sizes of zero in local headers (flag bit 3) and a data
// descriptor after each record, so a member's length comes from the pickle
// (storages), its own content (.npy header, the pickle's STOP) or, failing
// those, a scan for its descriptor.
type zipMachine struct {
	st   zipState
	hdr  []byte // the header being collected
	need int    // header bytes wanted so far

	mem      zipMember
	memDone  int64 // member data bytes consumed
	memKnown bool  // the member's length came from the header (else from the member or a scan)
	memLen   int64
	desc     bool // a data descriptor follows the member's data
	scanning bool // looking for the descriptor: the member's own data is over or of unknown length
	scan     descScanner

	pk               *pickleReader // torch's data.pkl of this archive, once seen
	sawTorch, sawNpy bool

	archive   int // index of the archive being read (0: the first)
	torchArch int // archives with a data.pkl
	lastTorch int // archive+1 of the last archive counted in torchArch
	skip      int64
	afterSkip zipState // where a tail record's variable part leads
	seek      sigSeeker
	lay       layoutSum // what the first archive declared
}

type zipState uint8

const (
	zsHeader zipState = iota // collecting a record header
	zsData                   // a member's data and, if any, its descriptor
	zsTail                   // collecting a central directory or end record's fixed part
	zsSkip                   // the variable part of such a record (names, comments)
	zsSeek                   // after an archive: raw until the next local header signature
	zsRest                   // nothing more can be parsed: raw to the end
)

const (
	sigLocal   = "PK\x03\x04"
	zipLocalSz = 30
)

// zipMember labels one member's data.
type zipMember interface {
	// feed labels a prefix of p and returns its length. It takes all of p
	// unless what length reports changed partway.
	feed(e *emitter, p []byte) int
	// length is the member's data length once it knows it from its own
	// content, lenPending while it may still learn it, lenUnknown once it
	// cannot.
	length() int64
}

const (
	lenPending = -1
	lenUnknown = -2
)

func newZipMachine() *zipMachine {
	return &zipMachine{need: 4}
}

func (z *zipMachine) format() string {
	switch {
	case z.torchArch >= 2:
		return "dcp"
	case z.sawTorch:
		return "torch-zip"
	case z.sawNpy:
		return "npz"
	}
	return "zip"
}

func (z *zipMachine) feed(e *emitter, p []byte) (int, bool) {
	total := len(p)
	for len(p) > 0 {
		var n int
		switch z.st {
		case zsHeader:
			var ok bool
			if n, ok = z.header(e, p); !ok {
				return total - len(p) + n, true
			}
		case zsData:
			was := z.scanning
			if n = z.data(e, p); n == 0 && z.st == zsData && z.scanning == was {
				return total - len(p), true // no progress: a bug, but never a hang
			}
		case zsTail, zsSkip:
			n = z.tail(e, p)
		case zsSeek:
			n = z.seekArchive(e, p)
		case zsRest:
			n = len(p)
			e.raw(int64(n))
		}
		p = p[n:]
	}
	return total, false
}

// header collects the record header; it returns the bytes taken and false if
// the stream is not a zip record.
func (z *zipMachine) header(e *emitter, p []byte) (int, bool) {
	k := min(z.need-len(z.hdr), len(p))
	z.hdr = append(z.hdr, p[:k]...)
	e.raw(int64(k))
	if len(z.hdr) < z.need {
		return k, true
	}
	switch {
	case z.need == 4:
		switch sig := string(z.hdr); {
		case sig == sigLocal:
			z.need = zipLocalSz
		case nextRecord(z.hdr):
			z.startTail() // the central directory: nothing more to label in this archive
			return k, true
		case z.archive > 0:
			// A later archive that is no zip after all (a signature inside a
			// byte item): look for the next one rather than give up the file.
			z.toSeek(z.hdr)
			return k, true
		default:
			return k, false
		}
	case z.need == zipLocalSz:
		z.need += int(binary.LittleEndian.Uint16(z.hdr[26:])) + int(binary.LittleEndian.Uint16(z.hdr[28:]))
	}
	if len(z.hdr) == z.need && z.st == zsHeader {
		z.startMember(e.pos)
	}
	return k, true
}

// startMember reads the complete local header in z.hdr and sets up the member
// whose data starts at stream offset pos.
func (z *zipMachine) startMember(pos int64) {
	h := z.hdr
	flags := binary.LittleEndian.Uint16(h[6:])
	method := binary.LittleEndian.Uint16(h[8:])
	csize := int64(binary.LittleEndian.Uint32(h[18:]))
	usize := int64(binary.LittleEndian.Uint32(h[22:]))
	nameLen := int(binary.LittleEndian.Uint16(h[26:]))
	name := string(h[zipLocalSz : zipLocalSz+nameLen])
	if csize == 0xFFFFFFFF || usize == 0xFFFFFFFF {
		csize = zip64Size(h[zipLocalSz+nameLen:], usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, csize)
	}
	z.desc = flags&0x08 != 0
	z.memKnown = csize >= 0 && (!z.desc || csize != 0)
	z.memLen = -1
	if z.memKnown {
		z.memLen = csize
	}
	stored := method == 0 && flags&0x01 == 0
	z.mem = z.member(name, stored)
	z.memDone, z.scanning = 0, false
	z.scan.reset(pos, pos)
	z.st, z.hdr, z.need = zsData, z.hdr[:0], 4
	z.settle(pos)
}

// zip64Size reads the compressed size from a zip64 extended-information
// extra field: the uncompressed size comes first if its header field was
// 0xFFFFFFFF, then the compressed size if its field was. It returns -1 when
// the field is missing or short.
func zip64Size(extra []byte, hasU, hasC bool, csize int64) int64 {
	for len(extra) >= 4 {
		id := binary.LittleEndian.Uint16(extra)
		n := int(binary.LittleEndian.Uint16(extra[2:]))
		if 4+n > len(extra) {
			return -1
		}
		if id != 0x0001 {
			extra = extra[4+n:]
			continue
		}
		f := extra[4 : 4+n]
		if hasU {
			if len(f) < 8 {
				return -1
			}
			f = f[8:]
		}
		if !hasC {
			return csize
		}
		if len(f) < 8 {
			return -1
		}
		if c := binary.LittleEndian.Uint64(f); c < 1<<62 {
			return int64(c)
		}
		return -1
	}
	return -1
}

// member picks how a member's data is labelled from its name.
func (z *zipMachine) member(name string, stored bool) zipMember {
	rest := name
	if _, r, ok := strings.Cut(name, "/"); ok {
		rest = r
	}
	switch {
	case rest == "data.pkl":
		z.sawTorch = true
		if z.lastTorch != z.archive+1 {
			z.torchArch, z.lastTorch = z.torchArch+1, z.archive+1
		}
		z.pk = newPickleReader()
		m := &pickleMember{r: z.pk}
		if z.archive == 0 {
			m.declare = z.declareStorages
		}
		return m
	case z.pk != nil && strings.HasPrefix(rest, "data/") && stored:
		info := z.pk.storages[rest[len("data/"):]]
		var l int64 = -1
		key := z.keyPrefix() + rest
		t := Label{Kind: Tensor, Key: key}
		if info != nil {
			l, t.DType = info.length(), info.elem.dtype
		}
		if z.memKnown {
			l = z.memLen // the header's size, when a writer gives it, is the truth
		}
		if l < 0 {
			return rawMember{}
		}
		return &tensorMember{label: tensorLabel(key, t.DType, l), n: l}
	case strings.HasSuffix(name, ".npy"):
		z.sawNpy = true
		if stored {
			m := &npyMember{m: newNpyMachine(z.keyPrefix()+name, false)}
			if z.archive == 0 {
				m.lay = &z.lay
			}
			return m
		}
	}
	return rawMember{}
}

// settle moves on once the member's data is complete or its length turns
// out to be unknowable: to the descriptor scan, or to the next header. pos is
// the stream offset.
func (z *zipMachine) settle(pos int64) {
	if z.scanning {
		return
	}
	l := z.memLen
	if !z.memKnown {
		l = z.mem.length()
	}
	switch {
	case l == lenPending || (l >= 0 && z.memDone < l):
		return
	case l >= 0 && z.memDone == l && !z.desc:
		z.st = zsHeader
	case z.desc:
		// Past the member's own data, or its length is unknowable: the record
		// ends at the first descriptor from here on.
		z.scanning = true
		z.scan.reset(z.scan.dataStart, pos)
	default:
		// No descriptor will tell where this record ends (a member overran
		// the size its header gave): nothing more can be parsed.
		z.scanning = true
	}
}

// data labels member data (and, while scanning, descriptor bytes).
func (z *zipMachine) data(e *emitter, p []byte) int {
	pos := e.pos
	if z.scanning {
		if !z.desc {
			e.raw(int64(len(p)))
			return len(p)
		}
		end := z.scan.find(p, pos)
		n := len(p)
		if end >= 0 {
			n = int(max(end-pos, 0))
		}
		e.raw(int64(n))
		z.scan.advance(p[:n], pos)
		if end >= 0 {
			z.endMember(end, pos+int64(n))
		}
		return n
	}
	k := len(p)
	if z.memKnown {
		k = int(min(int64(k), z.memLen-z.memDone))
	} else if l := z.mem.length(); l >= 0 {
		k = int(min(int64(k), l-z.memDone))
	}
	n := z.mem.feed(e, p[:k])
	z.memDone += int64(n)
	z.settle(pos + int64(n))
	return n
}

// endMember finishes a member whose descriptor ended at stream offset end;
// consumed is the offset up to which bytes were labelled. The bytes between
// them (at most descAhead-1) begin the next header.
func (z *zipMachine) endMember(end, consumed int64) {
	z.st, z.hdr, z.need = zsHeader, z.hdr[:0], 4
	if end < consumed {
		z.hdr = append(z.hdr, z.scan.tailFrom(end)...)
	}
}

// rawMember labels everything raw.
type rawMember struct{}

func (rawMember) feed(e *emitter, p []byte) int { e.raw(int64(len(p))); return len(p) }
func (rawMember) length() int64                 { return lenUnknown }

// pickleMember is torch's data.pkl: raw bytes, read for storage information.
// Its length is known at STOP, when declare (if set) is told the storages.
type pickleMember struct {
	r       *pickleReader
	n       int64
	declare func(*pickleReader)
}

func (m *pickleMember) feed(e *emitter, p []byte) int {
	k := len(p)
	if !m.r.done && !m.r.dead() {
		k = m.r.feed(p)
		m.n += int64(k)
		if m.r.done && m.declare != nil {
			m.declare(m.r)
		}
	}
	e.raw(int64(k))
	return k
}

func (m *pickleMember) length() int64 {
	switch {
	case m.r.done:
		return m.n
	case m.r.dead():
		return lenUnknown
	}
	return lenPending
}

// tensorMember is one tensor of known length.
type tensorMember struct {
	label Label
	n     int64
	done  int64
}

func (m *tensorMember) feed(e *emitter, p []byte) int {
	k := min(int64(len(p)), m.n-m.done)
	e.emit(m.label, k, m.done == 0)
	m.done += k
	if k < int64(len(p)) {
		e.raw(int64(len(p)) - k) // bytes past the tensor, if the caller gives any
	}
	return len(p)
}

func (m *tensorMember) length() int64 { return m.n }

// npyMember is an .npy inside an .npz. lay, if set, is told its array once
// the header is read.
type npyMember struct {
	m   *npyMachine
	lay *layoutSum
}

func (m *npyMember) feed(e *emitter, p []byte) int {
	n := m.m.step(e, p)
	if m.lay != nil {
		if l, size, ok := m.m.declared(); ok {
			m.lay.add(l, size)
			m.lay = nil
		}
	}
	return n
}
func (m *npyMember) length() int64 { return m.m.total() }

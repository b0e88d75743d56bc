package detect

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/ckptfs/ckptfs/encode"
)

// npyMachine labels one .npy: magic, version, header length and the header
// (a Python dict literal with descr, fortran_order and shape) are raw; the
// array data is one tensor under key, dtype from descr. It runs standalone
// (the data may run to the end of the stream) or as a member of an .npz (the
// zip feeds it no more than the member's bytes).
type npyMachine struct {
	key        string
	standalone bool // a whole stream (else an .npz member)

	st     npyState
	stage  int // header stage, see parse
	hdr    []byte
	need   int   // header bytes wanted so far
	done   int64 // bytes consumed
	label  Label
	data   int64 // data length, once the header is parsed
	failed bool
}

type npyState uint8

const (
	npyHeader npyState = iota
	npyData
	npyRest // raw to the end
)

const npyHeaderCap = 1 << 20 // longest .npy header kept (v1 headers are < 64 KiB)

func newNpyMachine(key string, standalone bool) *npyMachine {
	return &npyMachine{key: key, standalone: standalone, need: 10}
}

func (m *npyMachine) format() string { return "npy" }

// declared is the array's label and byte length once the header is read.
func (m *npyMachine) declared() (Label, int64, bool) {
	return m.label, m.data, m.label.Kind == Tensor
}

func (m *npyMachine) layout() Layout {
	var s layoutSum
	if l, n, ok := m.declared(); ok {
		s.add(l, n)
	}
	return s.layout()
}

// feed is the standalone entry: a header that does not parse hands the rest
// of the stream to the generic labelling.
func (m *npyMachine) feed(e *emitter, p []byte) (int, bool) {
	total := len(p)
	for len(p) > 0 && !m.failed {
		p = p[m.step(e, p):]
	}
	return total - len(p), m.failed
}

// step labels a prefix of p and returns its length; it stops right after the
// header so that a zip learns the member's length (total) at once. Inside a
// zip, a header that does not parse leaves the rest of the member raw.
func (m *npyMachine) step(e *emitter, p []byte) int {
	switch m.st {
	case npyHeader:
		k := min(m.need-len(m.hdr), len(p))
		m.hdr = append(m.hdr, p[:k]...)
		e.raw(int64(k))
		m.done += int64(k)
		for m.st == npyHeader && len(m.hdr) == m.need {
			m.parse()
		}
		return k
	case npyData:
		at := m.done - int64(len(m.hdr)) // data bytes labelled so far
		k := min(int64(len(p)), m.data-at)
		e.emit(m.label, k, at == 0)
		m.done += k
		if at+k == m.data {
			m.st = npyRest
		}
		return int(k)
	default:
		e.raw(int64(len(p)))
		m.done += int64(len(p))
		return len(p)
	}
}

// parse advances the header once m.hdr holds m.need bytes: the fixed
// prelude, then (v2/v3) the wider length field, then the dict.
func (m *npyMachine) parse() {
	h := m.hdr
	switch m.stage {
	case 0: // magic, version, and a v1 length
		if string(h[:6]) != string(npyMagic) {
			m.fail()
			return
		}
		switch h[6] {
		case 1:
			m.stage, m.need = 2, 10+int(binary.LittleEndian.Uint16(h[8:]))
		case 2, 3:
			m.stage, m.need = 1, 12
		default:
			m.fail()
		}
	case 1: // v2/v3 length
		n := binary.LittleEndian.Uint32(h[8:])
		if n > npyHeaderCap {
			m.fail()
			return
		}
		m.stage, m.need = 2, 12+int(n)
	default:
		off := 10
		if h[6] != 1 {
			off = 12
		}
		if !m.interpret(string(h[off:])) {
			m.fail()
		}
	}
}

func (m *npyMachine) fail() {
	m.st = npyRest
	m.failed = m.standalone // standalone: the dispatcher takes over
}

// interpret reads the header dict and sets the data label and length.
func (m *npyMachine) interpret(h string) bool {
	d, ok := parsePyDict(h)
	if !ok {
		return false
	}
	dt, width, ok := npyType(d["descr"], 0)
	if !ok {
		return false // object arrays hold a pickle, and unknown kinds: raw
	}
	shape, ok := d["shape"].([]any)
	if !ok {
		return false
	}
	n, ok := scaleByShape(width, shape)
	if !ok {
		return false
	}
	m.data = n
	m.label = tensorLabel(m.key, dt, n)
	m.st = npyData
	if n == 0 {
		m.st = npyRest
	}
	return true
}

// total is the .npy's byte length once the header gave it, lenPending while
// the header is incomplete, lenUnknown if it cannot be known.
func (m *npyMachine) total() int64 {
	switch {
	case m.st == npyHeader:
		return lenPending
	case m.label.Kind == Tensor: // the header parsed
		return int64(len(m.hdr)) + m.data
	}
	return lenUnknown
}

// npyType reads a descr: a type string, or a structured dtype (a list of
// (name, descr[, shape]) fields, packed as NumPy writes them, padding
// included as unnamed void fields), whose records are Bytes.
func npyType(descr any, depth int) (encode.DType, int64, bool) {
	switch d := descr.(type) {
	case string:
		return npyDescr(d)
	case []any:
		if depth > pyDepthCap || len(d) == 0 {
			return encode.Bytes, 0, false
		}
		var size int64
		for _, f := range d {
			field, isSeq := f.([]any)
			if !isSeq || len(field) < 2 || len(field) > 3 {
				return encode.Bytes, 0, false
			}
			_, w, ok := npyType(field[1], depth+1)
			if !ok {
				return encode.Bytes, 0, false
			}
			if len(field) == 3 {
				if w, ok = scaleByShape(w, field[2]); !ok {
					return encode.Bytes, 0, false
				}
			}
			if size += w; size > 1<<40 {
				return encode.Bytes, 0, false
			}
		}
		return encode.Bytes, size, size > 0
	}
	return encode.Bytes, 0, false
}

// scaleByShape multiplies w by the product of shape (a tuple of ints, or
// one int), refusing overflow.
func scaleByShape(w int64, shape any) (int64, bool) {
	dims, isSeq := shape.([]any)
	if !isSeq {
		dims = []any{shape}
	}
	for _, x := range dims {
		v, isInt := x.(int64)
		if !isInt || v < 0 || (v > 0 && w > (1<<62)/v) {
			return 0, false
		}
		w *= v
	}
	return w, true
}

// npyDescr maps a NumPy type string ('<f4', '|u1', '>i8', '<U5', '<M8[ns]')
// to a dtype and an item width. Little-endian floats (and complex, as pairs
// of floats) get float dtypes; everything else is Bytes.
func npyDescr(s string) (encode.DType, int64, bool) {
	order := byte('|')
	if s != "" && strings.IndexByte("<>|=", s[0]) >= 0 {
		order, s = s[0], s[1:]
	}
	if s == "" {
		return encode.Bytes, 0, false
	}
	kind, digits := s[0], s[1:]
	if i := strings.IndexByte(digits, '['); i >= 0 {
		digits = digits[:i] // datetime units: '<M8[ns]'
	}
	w, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || w <= 0 {
		return encode.Bytes, 0, false
	}
	little := order == '<' || order == '=' || order == '|'
	switch kind {
	case 'f':
		if little {
			switch w {
			case 2:
				return encode.Float16, 2, true
			case 4:
				return encode.Float32, 4, true
			case 8:
				return encode.Float64, 8, true
			}
		}
		return encode.Bytes, w, true
	case 'c':
		switch {
		case little && w == 8:
			return encode.Float32, w, true
		case little && w == 16:
			return encode.Float64, w, true
		}
		return encode.Bytes, w, true
	case 'U':
		return encode.Bytes, 4 * w, true
	case 'i', 'u', 'b', 'S', 'V', 'M', 'm', 'a':
		return encode.Bytes, w, true
	}
	return encode.Bytes, 0, false
}

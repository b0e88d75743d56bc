package detect

import (
	"strconv"

	"github.com/ckptfs/ckptfs/encode"
)

// caffeMachine walks a Caffe .caffemodel (NetParameter) or .solverstate
// (SolverState) as a stream of protobuf fields. Nested messages are followed
// by their length; only packed float/double runs inside a BlobProto become
// tensors, keyed by layer name, blob index and field: "conv1/0/data",
// "conv1/1/diff", "history/3/data" (solver history blobs are numbered in
// order). Everything else (tags, lengths, names, shapes) is raw.
//
// Field numbers follow Caffe's published caffe.proto:
//
//	NetParameter:      name=1, layers=2 (V1LayerParameter), layer=100 (LayerParameter)
//	V1LayerParameter:  name=4, blobs=6
//	LayerParameter:    name=1, type=2, blobs=7
//	BlobProto:         num..width=1..4, data=5, diff=6, shape=7, double_data=8, double_diff=9
//	SolverState:       iter=1, learned_net=2, history=3 (BlobProto), current_step=4
type caffeMachine struct {
	kind  caffeKind
	stack []pbFrame

	st    pbState
	v     uint64 // varint being read
	shift uint
	field uint64
	left  int64 // bytes left in a skipped, captured or tensor field
	label Label
	fresh bool
	str   []byte // a layer name being captured

	layers  int            // layers seen (for unnamed ones)
	history int            // solver history blobs seen
	names   map[string]int // layer names used, for duplicates
}

type caffeKind uint8

const (
	caffeModel caffeKind = iota
	caffeSolver
)

type pbMsg uint8

const (
	msgNet pbMsg = iota
	msgSolver
	msgV1Layer
	msgLayer
	msgBlob
)

type pbFrame struct {
	msg   pbMsg
	end   int64  // stream offset where the message ends; -1 at top level
	name  []byte // layer name, when seen
	named bool
	key   string // layer: its key once its first blob came; blob: "<layer>/<i>"
	blobs int
}

type pbState uint8

const (
	pbTag pbState = iota
	pbVarint
	pbLen
	pbSkip
	pbName
	pbTensor
)

const (
	caffeNameCap  = 256
	caffeDepthCap = 8
	caffeNamesCap = 1 << 14
)

// caffeHint reports whether a file name says Caffe, and which message.
func caffeHint(name string) (caffeKind, bool) {
	switch {
	case hasSuffixFold(name, ".caffemodel"):
		return caffeModel, true
	case hasSuffixFold(name, ".solverstate"):
		return caffeSolver, true
	}
	return 0, false
}

// caffePlausible checks that b starts with a field the top-level message
// defines, with its wire type.
func caffePlausible(kind caffeKind, b []byte) bool {
	var tag uint64
	for i, shift := 0, uint(0); ; i, shift = i+1, shift+7 {
		if i >= len(b) || i >= 3 {
			return false
		}
		tag |= uint64(b[i]&0x7f) << shift
		if b[i] < 0x80 {
			break
		}
	}
	field, wire := tag>>3, tag&7
	if kind == caffeSolver {
		switch field {
		case 1, 4:
			return wire == 0
		case 2, 3:
			return wire == 2
		}
		return false
	}
	switch field {
	case 1, 2, 3, 6, 8, 100:
		return wire == 2
	case 4, 5, 7:
		return wire == 0
	}
	return false
}

func newCaffeMachine(kind caffeKind) *caffeMachine {
	top := pbFrame{msg: msgNet, end: -1}
	if kind == caffeSolver {
		top.msg = msgSolver
	}
	return &caffeMachine{kind: kind, stack: []pbFrame{top}, names: map[string]int{}}
}

func (m *caffeMachine) format() string { return "caffe" }

// layout is unknown: a Caffe file declares nothing before its blobs.
func (m *caffeMachine) layout() Layout { return Layout{} }

func (m *caffeMachine) feed(e *emitter, p []byte) (int, bool) {
	total := len(p)
	for len(p) > 0 {
		var n int
		switch m.st {
		case pbTag, pbVarint, pbLen:
			n = 1
			e.raw(1)
			if !m.varintByte(p[0], e.pos) {
				return total - len(p) + n, true
			}
		case pbSkip, pbName, pbTensor:
			n = int(min(int64(len(p)), m.left))
			switch m.st {
			case pbTensor:
				e.emit(m.label, int64(n), m.fresh)
				m.fresh = false
			case pbName:
				if room := caffeNameCap - len(m.str); room > 0 {
					m.str = append(m.str, p[:min(n, room)]...)
				}
				fallthrough
			default:
				e.raw(int64(n))
			}
			if m.left -= int64(n); m.left == 0 {
				m.endField(e.pos)
			}
		}
		p = p[n:]
	}
	return total, false
}

// varintByte takes one byte of a tag, varint value or length; pos is the
// stream offset after it. It returns false on malformed input.
func (m *caffeMachine) varintByte(c byte, pos int64) bool {
	if m.shift >= 64 {
		return false
	}
	m.v |= uint64(c&0x7f) << m.shift
	m.shift += 7
	if c >= 0x80 {
		return true
	}
	v := m.v
	m.v, m.shift = 0, 0
	top := &m.stack[len(m.stack)-1]
	if top.end >= 0 && pos > top.end {
		return false
	}
	switch m.st {
	case pbTag:
		m.field = v >> 3
		if m.field == 0 {
			return false
		}
		switch v & 7 {
		case 0:
			m.st = pbVarint
		case 1:
			return m.skip(8, pos)
		case 2:
			m.st = pbLen
		case 5:
			return m.skip(4, pos)
		default:
			return false // groups and undefined wire types: not Caffe
		}
		return true
	case pbVarint:
		m.endField(pos)
		return true
	default: // pbLen
		if v > 1<<62 || (top.end >= 0 && int64(v) > top.end-pos) {
			return false
		}
		return m.startLen(int64(v), pos)
	}
}

func (m *caffeMachine) skip(n, pos int64) bool {
	top := m.stack[len(m.stack)-1]
	if top.end >= 0 && n > top.end-pos {
		return false
	}
	m.st, m.left = pbSkip, n
	return true
}

// startLen decides what a length-delimited field of n bytes at pos is.
func (m *caffeMachine) startLen(n, pos int64) bool {
	top := &m.stack[len(m.stack)-1]
	m.st, m.left = pbSkip, n
	switch sub, ok := m.submessage(top.msg, m.field); {
	case ok:
		if len(m.stack) >= caffeDepthCap {
			return false
		}
		f := pbFrame{msg: sub, end: pos + n}
		if sub == msgBlob {
			f.key = m.blobKey(top)
		}
		if sub == msgLayer || sub == msgV1Layer {
			m.layers++
		}
		m.stack = append(m.stack, f)
		m.st = pbTag
	case (top.msg == msgLayer && m.field == 1) || (top.msg == msgV1Layer && m.field == 4):
		m.st, m.str = pbName, m.str[:0]
	case top.msg == msgBlob:
		var dt encode.DType
		var what string
		switch m.field {
		case 5:
			dt, what = encode.Float32, "data"
		case 6:
			dt, what = encode.Float32, "diff"
		case 8:
			dt, what = encode.Float64, "double_data"
		case 9:
			dt, what = encode.Float64, "double_diff"
		}
		if what != "" && n%int64(dt.Width()) == 0 {
			m.st, m.fresh = pbTensor, true
			m.label = Label{Kind: Tensor, Key: top.key + "/" + what, DType: dt}
		}
	}
	if m.left == 0 && m.st != pbTag {
		m.endField(pos)
	} else if m.st == pbTag {
		m.pop(pos)
	}
	return true
}

// submessage says which message field f of msg holds, if one we descend into.
func (m *caffeMachine) submessage(msg pbMsg, f uint64) (pbMsg, bool) {
	switch {
	case msg == msgNet && f == 2:
		return msgV1Layer, true
	case msg == msgNet && f == 100:
		return msgLayer, true
	case msg == msgSolver && f == 3:
		return msgBlob, true
	case msg == msgLayer && f == 7, msg == msgV1Layer && f == 6:
		return msgBlob, true
	}
	return 0, false
}

// blobKey names the next blob of the layer (or solver) frame top.
func (m *caffeMachine) blobKey(top *pbFrame) string {
	if top.msg == msgSolver {
		m.history++
		return "history/" + strconv.Itoa(m.history-1)
	}
	if top.key == "" {
		name := "#" + strconv.Itoa(m.layers-1)
		if top.named {
			name = string(top.name)
		}
		if k := m.names[name]; k > 0 {
			m.names[name] = k + 1
			name += "#" + strconv.Itoa(k)
		} else if len(m.names) < caffeNamesCap {
			m.names[name] = 1
		}
		top.key = name
	}
	top.blobs++
	return top.key + "/" + strconv.Itoa(top.blobs-1)
}

// endField returns to reading tags after a field ending at pos.
func (m *caffeMachine) endField(pos int64) {
	if m.st == pbName {
		top := &m.stack[len(m.stack)-1]
		top.name, top.named = append(top.name[:0], m.str...), true
	}
	m.st = pbTag
	m.pop(pos)
}

// pop closes the messages that end at pos.
func (m *caffeMachine) pop(pos int64) {
	for len(m.stack) > 1 && m.stack[len(m.stack)-1].end == pos {
		m.stack = m.stack[:len(m.stack)-1]
	}
}

package detect

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"slices"

	"github.com/ckptfs/ckptfs/encode"
)

// safetensorsMachine labels a safetensors file: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets: [begin,
// end]}, "__metadata__": {...}}, then the data. Each tensor is keyed by its
// name; gaps between tensors and bytes after the last one are raw.
//
// The header is buffered to be parsed; one longer than safetensorsHeaderCap
// (the format allows 100 MB) hands the stream to the generic labelling.
type safetensorsMachine struct {
	lenBuf [8]byte
	lenN   int
	hdr    []byte
	hdrLen int
	parsed bool
	plan   []stPiece // what the data section holds, in order
	cur    int       // index in plan
	done   int64     // bytes of plan[cur] labelled
	lay    layoutSum // every tensor of the header, in plan order
}

type stPiece struct {
	label Label
	n     int64
}

const safetensorsHeaderCap = 4 << 20

func newSafetensorsMachine() *safetensorsMachine { return &safetensorsMachine{} }

func (m *safetensorsMachine) format() string { return "safetensors" }

func (m *safetensorsMachine) layout() Layout { return m.lay.layout() }

func (m *safetensorsMachine) feed(e *emitter, p []byte) (int, bool) {
	total := len(p)
	for len(p) > 0 {
		var n int
		switch {
		case m.lenN < 8:
			n = copy(m.lenBuf[m.lenN:], p)
			m.lenN += n
			e.raw(int64(n))
			if m.lenN == 8 {
				l := binary.LittleEndian.Uint64(m.lenBuf[:])
				if l > safetensorsHeaderCap {
					return total - len(p) + n, true
				}
				m.hdrLen = int(l)
				m.hdr = make([]byte, 0, m.hdrLen)
				if m.hdrLen == 0 && !m.parse() {
					return total - len(p) + n, true
				}
			}
		case !m.parsed:
			n = min(m.hdrLen-len(m.hdr), len(p))
			m.hdr = append(m.hdr, p[:n]...)
			e.raw(int64(n))
			if len(m.hdr) == m.hdrLen && !m.parse() {
				return total - len(p) + n, true
			}
		case m.cur < len(m.plan):
			pc := m.plan[m.cur]
			n = int(min(int64(len(p)), pc.n-m.done))
			e.emit(pc.label, int64(n), m.done == 0)
			if m.done += int64(n); m.done == pc.n {
				m.cur, m.done = m.cur+1, 0
			}
		default:
			n = len(p)
			e.raw(int64(n))
		}
		p = p[n:]
	}
	return total, false
}

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// parse reads the JSON header and plans the data section; false if the
// header is not a safetensors header.
func (m *safetensorsMachine) parse() bool {
	var raw map[string]json.RawMessage
	err := json.Unmarshal(m.hdr, &raw)
	m.hdr, m.parsed = nil, true // no longer needed: free the buffer early
	if err != nil {
		return false
	}
	type tensor struct {
		name       string
		dt         encode.DType
		begin, end int64
	}
	var ts []tensor
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var en stEntry
		if err := json.Unmarshal(msg, &en); err != nil || len(en.Offsets) != 2 ||
			en.Offsets[0] > en.Offsets[1] || en.Offsets[1] > 1<<62 {
			return false
		}
		ts = append(ts, tensor{name, stDType(en.DType), int64(en.Offsets[0]), int64(en.Offsets[1])})
	}
	slices.SortFunc(ts, func(a, b tensor) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	var at int64
	for _, t := range ts {
		// Declared even when not labelled (empty, overlapping): the layout
		// is what the header says.
		m.lay.add(tensorLabel(t.name, t.dt, t.end-t.begin), t.end-t.begin)
		if t.begin < at || t.begin == t.end {
			continue // overlapping (not valid safetensors) or empty: nothing to label
		}
		if t.begin > at {
			m.plan = append(m.plan, stPiece{rawLabel, t.begin - at})
		}
		m.plan = append(m.plan, stPiece{tensorLabel(t.name, t.dt, t.end-t.begin), t.end - t.begin})
		at = t.end
	}
	return true
}

// stDType maps safetensors dtype names; integers, bools and 8-bit floats are
// Bytes.
func stDType(s string) encode.DType {
	switch s {
	case "F32":
		return encode.Float32
	case "F16":
		return encode.Float16
	case "BF16":
		return encode.BFloat16
	case "F64":
		return encode.Float64
	}
	return encode.Bytes
}

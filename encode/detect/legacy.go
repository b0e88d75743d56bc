package detect

import (
	"encoding/binary"
	"strconv"
)

// legacyMachine labels torch.save's pre-zip format
// (_use_new_zipfile_serialization=False): five pickles (magic number,
// protocol version, sys_info, the object with persistent ids for storages,
// the list of storage keys), then for each key in that list an 8-byte
// little-endian element count and the storage's raw bytes.
//
// The legacy storage keys are memory addresses (str(storage._cdata)), which
// change from run to run, so tensors are keyed "data/<n>" where n is the
// order in which the object pickle first mentions the storage: stable for the
// same model, and the same numbering torch's zip format uses.
type legacyMachine struct {
	st     legacyState
	pickle int // index of the pickle being read
	r      *pickleReader
	main   *pickleReader // the object pickle, with the storages
	keys   []string
	next   int // index in keys of the next storage

	lay layoutSum // the object pickle's storages

	cnt   [8]byte
	cntN  int
	label Label
	left  int64 // bytes of the current storage still to come
	fresh bool  // the next data byte is the storage's first
}

type legacyState uint8

const (
	lgPickles legacyState = iota
	lgCount
	lgData
	lgRest
)

const legacyPickles = 5

func newLegacyMachine() *legacyMachine {
	return &legacyMachine{r: newPickleReader()}
}

func (m *legacyMachine) format() string { return "torch-legacy" }

func (m *legacyMachine) layout() Layout { return m.lay.layout() }

func (m *legacyMachine) feed(e *emitter, p []byte) (int, bool) {
	total := len(p)
	for len(p) > 0 {
		var n int
		switch m.st {
		case lgPickles:
			n = m.r.feed(p)
			e.raw(int64(n))
			if m.r.dead() {
				return total - len(p) + n, true
			}
			if m.r.done {
				m.endPickle()
			}
		case lgCount:
			n = min(8-m.cntN, len(p))
			copy(m.cnt[m.cntN:], p[:n])
			m.cntN += n
			e.raw(int64(n))
			if m.cntN == 8 && !m.startStorage() {
				return total - len(p) + n, true
			}
		case lgData:
			n = int(min(int64(len(p)), m.left))
			e.emit(m.label, int64(n), m.fresh)
			m.fresh = false
			m.left -= int64(n)
			if m.left == 0 {
				m.nextStorage()
			}
		default:
			n = len(p)
			e.raw(int64(n))
		}
		p = p[n:]
	}
	return total, false
}

func (m *legacyMachine) endPickle() {
	switch m.pickle {
	case 3:
		m.main = m.r
		for _, key := range m.r.order {
			info := m.r.storages[key]
			l := info.length()
			m.lay.add(tensorLabel("data/"+strconv.Itoa(info.ordinal), info.elem.dtype, l), l)
		}
	case 4:
		m.keys = m.r.strs
	}
	m.pickle++
	if m.pickle == legacyPickles {
		m.r = nil
		m.next = -1
		m.nextStorage()
		return
	}
	m.r = newPickleReader()
	m.r.collectStrs = m.pickle == 4
}

// nextStorage moves to the next storage's count, or to the raw end.
func (m *legacyMachine) nextStorage() {
	m.next++
	m.cntN = 0
	m.st = lgCount
	if m.next >= len(m.keys) {
		m.st = lgRest
	}
}

// startStorage reads the element count; false if the storage is unknown or
// its size impossible.
func (m *legacyMachine) startStorage() bool {
	info := m.main.storages[m.keys[m.next]]
	n := int64(binary.LittleEndian.Uint64(m.cnt[:]))
	if info == nil || n < 0 || n > (1<<62)/info.elem.width {
		return false
	}
	m.left = n * info.elem.width
	m.label = tensorLabel("data/"+strconv.Itoa(info.ordinal), info.elem.dtype, m.left)
	m.st, m.fresh = lgData, true
	if m.left == 0 {
		m.nextStorage()
	}
	return true
}

package detect

import (
	"encoding/binary"
	"testing"
)

func sbu(s string) []byte { return append([]byte{0x8c, byte(len(s))}, s...) } // SHORT_BINUNICODE

// A protocol-4 pickle as newer Pythons write it: FRAME, MEMOIZE, STACK_GLOBAL,
// short strings, and a memo fetch for the second persistent id.
func TestPickleProtocol4(t *testing.T) {
	var p []byte
	p = append(p, 0x80, 4, 0x95)
	p = binary.LittleEndian.AppendUint64(p, 999) // FRAME length: ignored
	p = append(p, '(')
	p = append(append(p, sbu("storage")...), 0x94) // memo 0
	p = append(append(append(p, sbu("torch")...), 0x94), sbu("HalfStorage")...)
	p = append(p, 0x94, 0x93, 0x94) // memo 2, STACK_GLOBAL, memo 3
	p = append(append(p, sbu("k0")...), sbu("cpu")...)
	p = append(p, 'M', 0x00, 0x01, 't', 'Q') // numel 256
	p = append(p, '(', 'h', 0, 'h', 3)       // 'storage', torch.HalfStorage from the memo
	p = append(append(append(p, sbu("k1")...), sbu("cpu")...), 'K', 7, 't', 'Q')
	p = append(p, 'B', 3, 0, 0, 0, '.', '.', '.') // BINBYTES holding STOP bytes
	p = append(p, 0x86, '.')
	r := newPickleReader()
	n := r.feed(append(p, "trailing"...))
	if n != len(p) || !r.done {
		t.Fatalf("consumed %d of %d, done %v", n, len(p), r.done)
	}
	for key, numel := range map[string]int64{"k0": 256, "k1": 7} {
		s := r.storages[key]
		if s == nil || s.numel != numel || s.elem.width != 2 {
			t.Errorf("%s: %+v", key, s)
		}
	}
	if r.storages["k1"].ordinal != 1 {
		t.Errorf("ordinal %d", r.storages["k1"].ordinal)
	}
}

// The machine-level tests (caps keep framing, unknown opcodes) are in
// encode/pickle.

func TestPickleTextOpcodes(t *testing.T) {
	// Protocol 0: GLOBAL, text INT, PUT/GET, STRING lines.
	p := []byte("(Vstorage\np0\nctorch\nDoubleStorage\np1\nV5\nVcpu\nI12\ntQS'x'\n(g0\ng1\nV6\ng2\nL3L\ntQ.")
	r := newPickleReader()
	if n := r.feed(p); n != len(p) || !r.done {
		t.Fatalf("consumed %d of %d", n, len(p))
	}
	if s := r.storages["5"]; s == nil || s.numel != 12 || s.elem.width != 8 {
		t.Errorf("storage 5: %+v", s)
	}
	if s := r.storages["6"]; s == nil || s.numel != 3 {
		t.Errorf("storage 6: %+v", s)
	}
}

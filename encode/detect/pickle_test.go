package detect

import (
	"bytes"
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

func TestPickleCapsKeepFraming(t *testing.T) {
	// More marks than the stack cap, then a persistent id: the reader stops
	// interpreting but still finds STOP.
	p := append([]byte{0x80, 2}, bytes.Repeat([]byte{'('}, pickleStackCap+10)...)
	p = pk(p).storagePid("FloatStorage", "0", 1).op('.')
	r := newPickleReader()
	if n := r.feed(p); n != len(p) || !r.done || r.mode != pmFrame || len(r.storages) != 0 {
		t.Errorf("consumed %d of %d, done %v, mode %v, storages %d", n, len(p), r.done, r.mode, len(r.storages))
	}

	// A huge BINBYTES8 is skipped without being kept.
	p = []byte{0x80, 4, 0x8e}
	p = binary.LittleEndian.AppendUint64(p, 1<<40)
	r = newPickleReader()
	r.feed(p)
	r.feed(make([]byte, 1<<20))
	if r.done || r.st != psData || cap(r.buf) > pickleStrCap*2 {
		t.Errorf("state %v, buffer cap %d", r.st, cap(r.buf))
	}

	// A long string is pushed as "other", not kept.
	p = append([]byte{0x80, 2, 'X'}, binary.LittleEndian.AppendUint32(nil, pickleStrCap+1)...)
	p = append(append(p, make([]byte, pickleStrCap+1)...), '.')
	r = newPickleReader()
	r.collectStrs = true
	if n := r.feed(p); n != len(p) || !r.done || len(r.strs) != 0 {
		t.Errorf("long string: consumed %d, done %v, strs %d", n, r.done, len(r.strs))
	}
}

func TestPickleDeadOnUnknownOpcode(t *testing.T) {
	r := newPickleReader()
	if n := r.feed([]byte{0x80, 2, 0xff, '.'}); n != 3 || r.st != psDead || r.done {
		t.Errorf("consumed %d, state %v", n, r.st)
	}
	if n := r.feed([]byte(".")); n != 0 {
		t.Errorf("dead reader consumed %d", n)
	}
}

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

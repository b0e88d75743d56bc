package detect

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// pickleReader is a streaming reader of one Python pickle (protocols 0..5).
// It frames every opcode exactly, so it finds STOP whatever the pickle holds,
// and it tracks just enough of the stack and memo to see torch's persistent
// ids: ('storage', torch.<Type>Storage, key, location, numel[, view]).
//
// Memory is bounded (a few MiB at worst): strings longer than pickleStrCap,
// tuples longer than pickleTupleCap and tuples inside tuples are kept as
// "other" values (a persistent id and a rebuild call's arguments need only
// their direct scalar elements); the memo keeps no tuples; the stack, memo
// and storage table have caps. A pickle that exceeds the stack cap is still
// framed (STOP is still found) but no longer interpreted.
type pickleReader struct {
	st      pstate
	op      byte
	buf     []byte // argument bytes being collected (capped)
	need    int    // bytes still needed for a fixed-size argument
	skip    int64  // bytes of a long argument still to pass over
	keep    bool   // whether the long argument is being kept in buf
	line1   string // first line of GLOBAL/INST
	lineCut bool   // the current line outgrew pickleLineCap
	lines   int    // lines of the current opcode read so far

	mode   pmode
	stack  []pval
	marks  []int
	memo   map[uint32]pval
	memoSz int    // string bytes held by memo
	memoN  uint32 // entries the real memo has (MEMOIZE's next index)

	// What the pickle told us.
	storages map[string]*storageInfo
	order    []string // storage keys in order of first appearance
	storSz   int      // bytes of keys in storages
	strs     []string // strings pushed, in order, when collectStrs is set
	strsSz   int

	collectStrs bool
	done        bool // STOP was read
}

type pstate uint8

const (
	psOp    pstate = iota // expecting an opcode
	psFixed               // collecting a fixed-size argument into buf
	psLen                 // collecting a length prefix into buf
	psData                // passing over (or keeping) a length-prefixed argument
	psLine                // reading a newline-terminated argument
	psDead                // not a pickle: an unknown opcode was met
)

type pmode uint8

const (
	pmFull  pmode = iota // interpreting the stack
	pmFrame              // only framing opcodes (a cap was hit or the stack made no sense)
)

// storageInfo is what a persistent id says about one storage.
type storageInfo struct {
	elem    elemType
	numel   int64
	ordinal int  // index in order of first appearance
	untyped bool // elem came from torch.UntypedStorage and may be refined by a dtype
}

// length is the storage's byte length, or -1 if it overflows.
func (s *storageInfo) length() int64 {
	if s.numel < 0 || s.elem.width <= 0 || s.numel > (1<<62)/s.elem.width {
		return -1
	}
	return s.numel * s.elem.width
}

const (
	pickleStrCap    = 1 << 10 // longest string value kept
	pickleLineCap   = 1 << 10 // longest text-opcode line kept
	pickleTupleCap  = 8       // longest tuple whose elements are kept
	pickleStackCap  = 1 << 14 // real pickles batch SETITEMS/APPENDS by 1000
	pickleMemoCap   = 1 << 15 // memo entries kept
	pickleMemoBytes = 4 << 20 // string bytes kept in the memo
	pickleStrsBytes = 4 << 20 // bytes of collected strings
	pickleStrsCap   = 1 << 18 // count of collected strings
	pickleStorCap   = 1 << 16 // storages recorded
	pickleStorBytes = 4 << 20 // bytes of recorded storage keys
	pickleMaxLenArg = 1 << 62 // longest length-prefixed argument accepted
)

type pkind uint8

const (
	pvOther pkind = iota
	pvStr
	pvInt
	pvGlobal // s = module + "\n" + name
	pvTuple
	pvPers // s = storage key
)

type pval struct {
	k pkind
	s string
	i int64
	t []pval // a tuple's elements, none of them a tuple with elements
}

func newPickleReader() *pickleReader {
	return &pickleReader{storages: map[string]*storageInfo{}, memo: map[uint32]pval{}}
}

// feed reads p and returns how many bytes belong to the pickle: len(p) until
// STOP, then the bytes up to and including STOP. After STOP (or once the
// reader is dead) it reads nothing more.
func (r *pickleReader) feed(p []byte) int {
	i := 0
	for i < len(p) && !r.done && r.st != psDead {
		switch r.st {
		case psOp:
			r.op = p[i]
			i++
			r.begin()
		case psFixed, psLen:
			k := min(r.need, len(p)-i)
			r.buf = append(r.buf, p[i:i+k]...)
			r.need -= k
			i += k
			if r.need == 0 {
				if r.st == psFixed {
					r.st = psOp
					r.apply(r.buf)
				} else {
					r.startData()
				}
			}
		case psData:
			k := int(min(r.skip, int64(len(p)-i)))
			if r.keep {
				r.buf = append(r.buf, p[i:i+k]...)
			}
			r.skip -= int64(k)
			i += k
			if r.skip == 0 {
				r.st = psOp
				if r.keep {
					r.apply(r.buf)
				} else {
					r.push(pval{})
				}
			}
		case psLine:
			j := i
			for j < len(p) && p[j] != '\n' {
				j++
			}
			if !r.lineCut {
				if len(r.buf)+(j-i) > pickleLineCap {
					r.lineCut = true
				} else {
					r.buf = append(r.buf, p[i:j]...)
				}
			}
			i = j
			if j < len(p) {
				i++ // the newline
				r.endLine()
			}
		}
	}
	return i
}

// argument shapes of the opcodes, by opcode byte.
const (
	argNone  = 0
	argLine  = -1 // one text line
	argLine2 = -2 // two text lines
	argLen1  = -3 // 1-byte length then data
	argLen4  = -4 // 4-byte length then data
	argLen8  = -5 // 8-byte length then data
	argBad   = -6 // not an opcode
)

var pickleArgs = func() [256]int8 {
	var a [256]int8
	for i := range a {
		a[i] = argBad
	}
	for _, c := range []byte("(.0123NQRabdelostu})]\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98") {
		a[c] = argNone
	}
	for _, c := range []byte("FILPSVgp") {
		a[c] = argLine
	}
	a['c'], a['i'] = argLine2, argLine2
	a['J'], a['j'], a['r'] = 4, 4, 4
	a['K'], a['h'], a['q'], a['\x80'], a['\x82'] = 1, 1, 1, 1, 1
	a['M'], a['\x83'] = 2, 2
	a['\x84'] = 4
	a['G'], a['\x95'] = 8, 8
	a['T'], a['X'], a['B'], a['\x8b'] = argLen4, argLen4, argLen4, argLen4
	a['U'], a['C'], a['\x8c'], a['\x8a'] = argLen1, argLen1, argLen1, argLen1
	a['\x8d'], a['\x8e'], a['\x96'] = argLen8, argLen8, argLen8
	return a
}()

// begin starts reading the argument of r.op.
func (r *pickleReader) begin() {
	r.buf = r.buf[:0]
	switch a := pickleArgs[r.op]; {
	case a == argNone:
		r.apply(nil)
	case a > 0:
		r.st, r.need = psFixed, int(a)
	case a == argLine || a == argLine2:
		r.st, r.lines, r.lineCut = psLine, 0, false
	case a == argLen1:
		r.st, r.need = psLen, 1
	case a == argLen4:
		r.st, r.need = psLen, 4
	case a == argLen8:
		r.st, r.need = psLen, 8
	default:
		r.st = psDead
	}
}

func (r *pickleReader) startData() {
	var n uint64
	switch len(r.buf) {
	case 1:
		n = uint64(r.buf[0])
	case 4:
		n = uint64(binary.LittleEndian.Uint32(r.buf))
	default:
		n = binary.LittleEndian.Uint64(r.buf)
	}
	if n > pickleMaxLenArg || (r.op == 'T' && int32(n) < 0) {
		r.st = psDead
		return
	}
	r.buf = r.buf[:0]
	r.skip = int64(n)
	// Keep strings (for keys and names) and small longs (for numel).
	switch r.op {
	case 'X', '\x8c', '\x8d', 'T', 'U':
		r.keep = n <= pickleStrCap && r.mode == pmFull
	case '\x8a', '\x8b':
		r.keep = n <= 8 && r.mode == pmFull
	default:
		r.keep = false
	}
	r.st = psData
	if n == 0 {
		r.st = psOp
		if r.keep {
			r.apply(nil)
		} else {
			r.push(pval{})
		}
	}
}

func (r *pickleReader) endLine() {
	line := string(r.buf)
	if r.lineCut {
		line = "\x00" // no real name or number looks like this
	}
	r.buf, r.lineCut = r.buf[:0], false
	r.lines++
	if pickleArgs[r.op] == argLine2 && r.lines == 1 {
		r.line1 = line
		return
	}
	r.st = psOp
	r.applyLine(r.line1, line)
}

// push puts v on the stack; past the cap the reader stops interpreting.
func (r *pickleReader) push(v pval) {
	if r.mode != pmFull {
		return
	}
	if len(r.stack) >= pickleStackCap {
		r.degrade()
		return
	}
	r.stack = append(r.stack, v)
}

func (r *pickleReader) pop(n int) []pval {
	if len(r.stack) < n || (len(r.marks) > 0 && len(r.stack)-n < r.marks[len(r.marks)-1]) {
		r.degrade()
		return nil
	}
	v := r.stack[len(r.stack)-n:]
	r.stack = r.stack[:len(r.stack)-n]
	return v
}

// popMark pops everything above the topmost mark, and the mark.
func (r *pickleReader) popMark() ([]pval, bool) {
	if len(r.marks) == 0 {
		r.degrade()
		return nil, false
	}
	m := r.marks[len(r.marks)-1]
	r.marks = r.marks[:len(r.marks)-1]
	v := r.stack[m:]
	r.stack = r.stack[:m]
	return v, true
}

// degrade drops the interpretation state; framing continues so STOP is found.
func (r *pickleReader) degrade() {
	r.mode = pmFrame
	r.stack, r.marks, r.memo = nil, nil, nil
}

func (r *pickleReader) top() (pval, bool) {
	if len(r.stack) == 0 || (len(r.marks) > 0 && len(r.stack) == r.marks[len(r.marks)-1]) {
		return pval{}, false
	}
	return r.stack[len(r.stack)-1], true
}

func (r *pickleReader) memoPut(i uint32) {
	v, ok := r.top()
	if !ok {
		r.degrade()
		return
	}
	old, had := r.memo[i]
	if !had {
		r.memoN++ // approximate once the cap drops entries; exact for real pickles
	}
	if v.k == pvTuple {
		v = pval{} // tuples are rebuilt, never fetched, in the pickles that matter
	}
	if !had && (len(r.memo) >= pickleMemoCap || r.memoSz+len(v.s) > pickleMemoBytes) {
		return // later GETs of it read as "other": we lose detail, not framing
	}
	r.memoSz += len(v.s) - len(old.s)
	r.memo[i] = v
}

func (r *pickleReader) memoGet(i uint32) {
	r.push(r.memo[i]) // a missing entry is the zero pval: "other"
}

// apply performs r.op with its binary argument arg.
func (r *pickleReader) apply(arg []byte) {
	if r.op == '.' {
		r.done = true
		return
	}
	if r.mode != pmFull {
		return
	}
	switch r.op {
	case '(': // MARK
		if len(r.marks) >= pickleStackCap {
			r.degrade()
			return
		}
		r.marks = append(r.marks, len(r.stack))
	case '0': // POP
		if len(r.marks) > 0 && len(r.stack) == r.marks[len(r.marks)-1] {
			r.marks = r.marks[:len(r.marks)-1] // POP of a mark, as pickle allows
			return
		}
		r.pop(1)
	case '1': // POP_MARK
		r.popMark()
	case '2': // DUP
		if v, ok := r.top(); ok {
			r.push(v)
		} else {
			r.degrade()
		}
	case 'J':
		r.push(pval{k: pvInt, i: int64(int32(binary.LittleEndian.Uint32(arg)))})
	case 'K':
		r.push(pval{k: pvInt, i: int64(arg[0])})
	case 'M':
		r.push(pval{k: pvInt, i: int64(binary.LittleEndian.Uint16(arg))})
	case '\x8a', '\x8b': // LONG1, LONG4 (kept only when at most 8 bytes)
		r.push(pval{k: pvInt, i: leSigned(arg)})
	case 'X', '\x8c', '\x8d', 'T', 'U':
		r.pushStr(string(arg))
	case 'N', '\x88', '\x89', '}', ']', 'G', 'B', 'C', '\x8e', '\x96', '\x8f', '\x82', '\x83', '\x84', '\x97':
		r.push(pval{})
	case ')':
		r.push(pval{k: pvTuple})
	case '\x80', '\x95', '\x98': // PROTO, FRAME, READONLY_BUFFER
	case 'Q': // BINPERSID
		if v := r.pop(1); v != nil {
			r.push(r.persistent(v[0]))
		}
	case 'R', '\x81': // REDUCE, NEWOBJ
		if r.pop(2) != nil {
			r.push(pval{})
		}
	case '\x92': // NEWOBJ_EX
		if r.pop(3) != nil {
			r.push(pval{})
		}
	case 'b', 'a': // BUILD, APPEND
		r.pop(1)
	case 's': // SETITEM
		r.pop(2)
	case 'e', 'u', '\x90': // APPENDS, SETITEMS, ADDITEMS
		r.popMark()
	case 'd', 'l', '\x91', 'o': // DICT, LIST, FROZENSET, OBJ
		if _, ok := r.popMark(); ok {
			r.push(pval{})
		}
	case 't':
		if v, ok := r.popMark(); ok {
			r.push(r.tuple(v))
		}
	case '\x85', '\x86', '\x87':
		if v := r.pop(int(r.op - '\x84')); v != nil {
			r.push(r.tuple(v))
		}
	case '\x93': // STACK_GLOBAL
		if v := r.pop(2); v != nil {
			r.push(global(v[0], v[1]))
		}
	case '\x94': // MEMOIZE
		r.memoPut(r.memoN)
	case 'h':
		r.memoGet(uint32(arg[0]))
	case 'j':
		r.memoGet(binary.LittleEndian.Uint32(arg))
	case 'q':
		r.memoPut(uint32(arg[0]))
	case 'r':
		r.memoPut(binary.LittleEndian.Uint32(arg))
	default:
		r.degrade()
	}
}

// applyLine performs a text opcode (protocol 0 and GLOBAL/INST).
func (r *pickleReader) applyLine(l1, l2 string) {
	if r.mode != pmFull {
		return
	}
	switch r.op {
	case 'c': // GLOBAL
		r.push(pval{k: pvGlobal, s: l1 + "\n" + l2})
	case 'i': // INST
		if _, ok := r.popMark(); ok {
			r.push(pval{})
		}
	case 'I', 'L':
		n, err := strconv.ParseInt(strings.TrimSuffix(l2, "L"), 10, 64)
		if err != nil {
			r.push(pval{}) // True/False spelled 01/00 parse fine; anything else is other
			return
		}
		r.push(pval{k: pvInt, i: n})
	case 'g', 'p':
		n, err := strconv.ParseUint(l2, 10, 32)
		if err != nil {
			r.degrade()
			return
		}
		if r.op == 'g' {
			r.memoGet(uint32(n))
		} else {
			r.memoPut(uint32(n))
		}
	case 'V': // raw-unicode-escape: plain text unless it holds a backslash
		if strings.IndexByte(l2, '\\') < 0 && l2 != "\x00" {
			r.pushStr(l2)
			return
		}
		r.push(pval{})
	case 'S': // a quoted repr: plain when quoted simply and free of escapes
		if len(l2) >= 2 && (l2[0] == '\'' || l2[0] == '"') && l2[len(l2)-1] == l2[0] &&
			strings.IndexByte(l2, '\\') < 0 {
			r.pushStr(l2[1 : len(l2)-1])
			return
		}
		r.push(pval{})
	default: // F, P
		r.push(pval{})
	}
}

func (r *pickleReader) pushStr(s string) {
	if r.collectStrs && r.strsSz+len(s) <= pickleStrsBytes && len(r.strs) < pickleStrsCap {
		r.strs = append(r.strs, s)
		r.strsSz += len(s)
	}
	r.push(pval{k: pvStr, s: s})
}

func global(mod, name pval) pval {
	if mod.k != pvStr || name.k != pvStr {
		return pval{}
	}
	return pval{k: pvGlobal, s: mod.s + "\n" + name.s}
}

// tuple builds a tuple value, keeping its elements only while small and shallow.
func (r *pickleReader) tuple(v []pval) pval {
	if len(v) > pickleTupleCap {
		return pval{}
	}
	t := pval{k: pvTuple, t: make([]pval, len(v))}
	for i, x := range v {
		if x.k == pvTuple {
			x = pval{} // nested tuples (shapes, strides) are not needed
		}
		t.t[i] = x
	}
	r.refineUntyped(t.t)
	return t
}

// persistent interprets a persistent id and returns the value persistent_load
// would push: a reference to the storage.
func (r *pickleReader) persistent(pid pval) pval {
	t := pid.t
	if pid.k != pvTuple || len(t) < 5 || t[0].k != pvStr || t[0].s != "storage" ||
		t[1].k != pvGlobal || t[2].k != pvStr || t[4].k != pvInt {
		return pval{}
	}
	key := t[2].s
	if _, seen := r.storages[key]; !seen && len(r.storages) < pickleStorCap && r.storSz+len(key) <= pickleStorBytes {
		mod, name, _ := strings.Cut(t[1].s, "\n")
		if et, ok := storageTypes[name]; ok && mod == "torch" {
			r.storages[key] = &storageInfo{
				elem: et, numel: t[4].i, ordinal: len(r.order),
				untyped: name == "UntypedStorage",
			}
			r.order = append(r.order, key)
			r.storSz += len(key)
		}
	}
	return pval{k: pvPers, s: key}
}

// refineUntyped gives an untyped storage the dtype that sits beside it in the
// same argument tuple (torch._utils._rebuild_tensor_v3(storage, ..., dtype, ...)
// in newer torch). Its byte length stays numel (= nbytes) * 1.
func (r *pickleReader) refineUntyped(t []pval) {
	var st *storageInfo
	var dt elemType
	found := false
	for _, x := range t {
		switch x.k {
		case pvPers:
			if s := r.storages[x.s]; s != nil && s.untyped {
				st = s
			}
		case pvGlobal:
			mod, name, _ := strings.Cut(x.s, "\n")
			if e, ok := torchDTypes[name]; ok && mod == "torch" {
				dt, found = e, true
			}
		}
	}
	if st != nil && found {
		st.elem.dtype = dt.dtype
		st.untyped = false
	}
}

// leSigned decodes a little-endian two's-complement integer of up to 8 bytes.
func leSigned(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if shift := 64 - 8*uint(len(b)); b[len(b)-1]&0x80 != 0 && shift > 0 {
		u |= ^uint64(0) << (64 - shift)
	}
	return int64(u)
}

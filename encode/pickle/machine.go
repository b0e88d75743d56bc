package pickle

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Limits bound what a Machine keeps; a zero field is no limit.
type Limits struct {
	Str   int // longest string kept; a longer one is Other
	Line  int // longest text-opcode line kept; a longer one reads as "\x00"
	Tuple int // longest tuple whose elements are kept; a longer one is Other
	Stack int // most stack entries, and most marks; past it the machine breaks
	Memo  int // memo entries kept; further new entries are dropped
	// MemoBytes bounds the Text bytes the memo keeps; further new entries
	// are dropped.
	MemoBytes int
}

// Bounded are the limits of a reader that must stay small whatever it is
// fed: a few MiB at worst. Real pickles batch SETITEMS and APPENDS by 1000,
// so they never come near the stack limit.
var Bounded = Limits{
	Str:       1 << 10,
	Line:      1 << 10,
	Tuple:     8,
	Stack:     1 << 14,
	Memo:      1 << 15,
	MemoBytes: 4 << 20,
}

// Config says what a Machine keeps and how it is told about values.
type Config struct {
	Limits
	// Graph keeps the contents of lists, dicts and call results, and tuples
	// of any depth, as Nodes shared by their references: the object graph
	// the pickle describes, for a reader that walks it (its memory then
	// grows with the pickle, unless Limits bound it). Graph mode is also
	// strict where the graph would go wrong: a GET of an index never PUT,
	// and an opcode that fills a container with no container under it,
	// break the machine.
	//
	// Outside Graph mode lists, dicts and objects are opaque, a tuple keeps
	// its direct elements only (a tuple inside it is Other) and the memo
	// keeps no tuples (it keeps them as Other): a GET the memo cannot answer
	// pushes Other.
	Graph bool
	// Persistent returns the value a persistent id loads as (BINPERSID's
	// popped value, PERSID's line as a Str). Nil: Other.
	Persistent func(pid Value) Value
	// OnTuple is told of each tuple built from elements (TUPLE, TUPLE1..3)
	// whose elements are kept, as it is pushed.
	OnTuple func(t Value)
	// OnStr is told of each string kept, in the order they are pushed.
	OnStr func(s string)
}

// Machine is a streaming reader of one pickle. Feed it the pickle's bytes
// in pieces of any size: what it finds does not depend on where they are
// cut.
//
// It frames every opcode, so it finds STOP whatever the stack holds. It
// interprets the stack until the pickle stops making sense to it (stack
// underflow, an opcode that is not one of the pickle's but framed as one,
// the stack limit, a Graph mode check) and is then Broken: it goes on
// framing, so STOP is still found, but changes no value. An unknown opcode, or a length no pickle has, make
// it Dead: the bytes are not a pickle, and it reads nothing more.
type Machine struct {
	cfg Config

	// Framing.
	st      pstate
	op      byte
	buf     []byte // argument bytes being collected (capped)
	need    int    // bytes still needed for a fixed-size argument
	skip    int64  // bytes of a length-prefixed argument still to read
	keep    bool   // whether that argument is being kept in buf
	line1   string // first line of GLOBAL/INST
	lineCut bool   // the current line outgrew Limits.Line
	lines   int    // lines of the current opcode read so far

	// Interpretation.
	stack  []Value
	marks  []int
	memo   []Value          // entries 0..len-1, as pickles PUT them: in order
	sparse map[uint32]Value // the other entries
	memoSz int              // Text bytes held by memo and sparse
	memoN  uint32           // entries the real memo has: MEMOIZE's next index
	broken bool
	result Value
	hasRes bool
	done   bool // STOP was read
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

// maxLenArg is the longest length-prefixed argument accepted.
const maxLenArg = 1 << 62

// New returns a Machine at the start of a pickle.
func New(c Config) *Machine {
	return &Machine{cfg: c}
}

// Done reports whether STOP was read.
func (m *Machine) Done() bool { return m.done }

// Dead reports whether the bytes turned out not to be a pickle: an unknown
// opcode or an impossible length.
func (m *Machine) Dead() bool { return m.st == psDead }

// Broken reports whether the machine stopped interpreting (see Machine).
// Outside Graph mode it has then dropped its stack and memo.
func (m *Machine) Broken() bool { return m.broken }

// Result returns the pickled object: the value on top of the stack at STOP.
// ok is false before STOP, when the machine broke before it, and when STOP
// found nothing to pop.
func (m *Machine) Result() (v Value, ok bool) { return m.result, m.hasRes }

// Salvage returns, for a pickle cut short or spoilt, the object it was
// building: the bottom of the stack, after finishing the SETITEMS and
// APPENDS left open, innermost first, so that in Graph mode the items
// already read keep their full paths (a value under the root dict's
// "optimizer" is not found under its inner dict alone). ok is false if the
// stack is empty. Call it after the last Feed.
func (m *Machine) Salvage() (Value, bool) {
	stack, marks := m.stack, m.marks
	for len(marks) > 0 {
		k := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		if k == 0 || k > len(stack) {
			break
		}
		items := stack[k:]
		switch t := stack[k-1]; t.Kind {
		case Dict, Object:
			setItems(t, items[:len(items)&^1])
		case List:
			appendItems(t, items)
		}
		stack = stack[:k]
	}
	if len(stack) == 0 {
		return Value{}, false
	}
	return stack[0], true
}

// Feed reads p and returns how many bytes belong to the pickle: len(p)
// until STOP, then the bytes up to and including STOP. After STOP, or once
// the machine is Dead, it reads nothing more.
func (m *Machine) Feed(p []byte) int {
	i := 0
	for i < len(p) && !m.done && m.st != psDead {
		switch m.st {
		case psOp:
			m.op = p[i]
			i++
			m.begin()
		case psFixed, psLen:
			k := min(m.need, len(p)-i)
			m.buf = append(m.buf, p[i:i+k]...)
			m.need -= k
			i += k
			if m.need == 0 {
				if m.st == psFixed {
					m.st = psOp
					m.apply(m.buf)
				} else {
					m.startData()
				}
			}
		case psData:
			k := int(min(m.skip, int64(len(p)-i)))
			if m.keep {
				m.buf = append(m.buf, p[i:i+k]...)
			}
			m.skip -= int64(k)
			i += k
			if m.skip == 0 {
				m.endData()
			}
		case psLine:
			j := i
			for j < len(p) && p[j] != '\n' {
				j++
			}
			if !m.lineCut {
				if m.cfg.Line > 0 && len(m.buf)+(j-i) > m.cfg.Line {
					m.lineCut = true
				} else {
					m.buf = append(m.buf, p[i:j]...)
				}
			}
			i = j
			if j < len(p) {
				i++ // the newline
				m.endLine()
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

var opArgs = func() [256]int8 {
	var a [256]int8
	for i := range a {
		a[i] = argBad
	}
	// '3' is no opcode, but has always been framed as one that breaks the
	// machine (rather than killing it): kept so, as readers depend on where
	// a pickle is found to end.
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

// begin starts reading the argument of m.op.
func (m *Machine) begin() {
	m.buf = m.buf[:0]
	switch a := opArgs[m.op]; {
	case a == argNone:
		m.apply(nil)
	case a > 0:
		m.st, m.need = psFixed, int(a)
	case a == argLine || a == argLine2:
		m.st, m.lines, m.lineCut = psLine, 0, false
	case a == argLen1:
		m.st, m.need = psLen, 1
	case a == argLen4:
		m.st, m.need = psLen, 4
	case a == argLen8:
		m.st, m.need = psLen, 8
	default:
		m.st = psDead
	}
}

func (m *Machine) startData() {
	var n uint64
	switch len(m.buf) {
	case 1:
		n = uint64(m.buf[0])
	case 4:
		n = uint64(binary.LittleEndian.Uint32(m.buf))
	default:
		n = binary.LittleEndian.Uint64(m.buf)
	}
	if n > maxLenArg || (m.op == 'T' && int32(n) < 0) {
		m.st = psDead
		return
	}
	m.buf = m.buf[:0]
	m.skip = int64(n)
	// Keep strings (keys, names) and longs that fit an int64; pass over the
	// rest (bytes, long strings, big longs) without keeping them.
	switch m.op {
	case 'X', '\x8c', '\x8d', 'T', 'U':
		m.keep = !m.broken && (m.cfg.Str <= 0 || n <= uint64(m.cfg.Str))
	case '\x8a', '\x8b':
		m.keep = !m.broken && n <= 8
	default:
		m.keep = false
	}
	m.st = psData
	if n == 0 {
		m.endData()
	}
}

func (m *Machine) endData() {
	m.st = psOp
	if m.keep {
		m.apply(m.buf)
	} else {
		m.push(Value{})
	}
}

func (m *Machine) endLine() {
	line := string(m.buf)
	if m.lineCut {
		line = "\x00" // no real name or number looks like this
	}
	m.buf, m.lineCut = m.buf[:0], false
	m.lines++
	if opArgs[m.op] == argLine2 && m.lines == 1 {
		m.line1 = line
		return
	}
	m.st = psOp
	m.applyLine(m.line1, line)
}

// fail stops the interpretation; framing goes on so STOP is found.
func (m *Machine) fail() {
	m.broken = true
	if !m.cfg.Graph {
		m.stack, m.marks, m.memo, m.sparse = nil, nil, nil, nil
	}
}

// floor is the lowest stack index the topmost mark lets an opcode pop.
func (m *Machine) floor() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

// push puts v on the stack; past the stack limit the machine breaks.
func (m *Machine) push(v Value) {
	if m.broken {
		return
	}
	if m.cfg.Stack > 0 && len(m.stack) >= m.cfg.Stack {
		m.fail()
		return
	}
	m.stack = append(m.stack, v)
}

func (m *Machine) pop() (Value, bool) {
	if m.broken || len(m.stack) <= m.floor() {
		m.fail()
		return Value{}, false
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, true
}

// popN pops n values (n <= 3) and returns them bottom first. It pops them
// one at a time, as Python does: where it breaks, those above are gone.
func (m *Machine) popN(n int) (v [3]Value, ok bool) {
	for i := n - 1; i >= 0; i-- {
		if v[i], ok = m.pop(); !ok {
			return v, false
		}
	}
	return v, true
}

// top returns the top of the stack, without popping it.
func (m *Machine) top() (Value, bool) {
	if m.broken || len(m.stack) <= m.floor() {
		m.fail()
		return Value{}, false
	}
	return m.stack[len(m.stack)-1], true
}

// target is the container an opcode fills: in Graph mode the top of the
// stack, which must be there; outside it, nothing is filled or checked.
func (m *Machine) target() (Value, bool) {
	if !m.cfg.Graph {
		return Value{}, false
	}
	return m.top()
}

// popMark pops everything above the topmost mark, and the mark. The items
// stay valid until the next push.
func (m *Machine) popMark() ([]Value, bool) {
	if m.broken || len(m.marks) == 0 {
		m.fail()
		return nil, false
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := m.stack[k:]
	m.stack = m.stack[:k]
	return items, true
}

func (m *Machine) memoPut(i uint32) {
	v, ok := m.top()
	if !ok {
		return
	}
	old, had := m.memoAt(i)
	if !had {
		m.memoN++ // approximate once a limit drops entries; exact for real pickles
	}
	if v.Kind == Tuple && !m.cfg.Graph {
		v = Value{} // tuples are rebuilt, never fetched, in the pickles that matter
	}
	if !had && (m.cfg.Memo > 0 && len(m.memo)+len(m.sparse) >= m.cfg.Memo ||
		m.cfg.MemoBytes > 0 && m.memoSz+len(v.Text) > m.cfg.MemoBytes) {
		return // later GETs of it read as Other: detail is lost, not framing
	}
	m.memoSz += len(v.Text) - len(old.Text)
	switch {
	case uint64(i) < uint64(len(m.memo)):
		m.memo[i] = v
	case !had && uint64(i) == uint64(len(m.memo)):
		m.memo = append(m.memo, v)
	default:
		if m.sparse == nil {
			m.sparse = map[uint32]Value{}
		}
		m.sparse[i] = v
	}
}

// memoAt returns the memo's entry i.
func (m *Machine) memoAt(i uint32) (Value, bool) {
	if uint64(i) < uint64(len(m.memo)) {
		return m.memo[i], true
	}
	v, ok := m.sparse[i]
	return v, ok
}

func (m *Machine) memoGet(i uint32) {
	v, ok := m.memoAt(i)
	if !ok && m.cfg.Graph {
		m.fail()
		return
	}
	m.push(v) // outside Graph mode a missing entry is the zero Value: Other
}

// container returns a new empty container of kind k (opaque outside Graph
// mode).
func (m *Machine) container(k Kind) Value {
	if !m.cfg.Graph {
		return Value{Kind: k}
	}
	return Value{Kind: k, Node: &Node{}}
}

// tuple builds a tuple of items (which it copies).
func (m *Machine) tuple(items []Value) Value {
	if m.cfg.Tuple > 0 && len(items) > m.cfg.Tuple {
		return Value{}
	}
	n := newNode(len(items))
	for i, x := range items {
		if x.Kind == Tuple && !m.cfg.Graph {
			x = Value{} // nested tuples (shapes, strides) are not kept
		}
		n.Items[i] = Item{Role: Elem, Val: x}
	}
	t := Value{Kind: Tuple, Node: n}
	if m.cfg.OnTuple != nil {
		m.cfg.OnTuple(t)
	}
	return t
}

// newNode returns a Node with n zero items, made in one allocation when n
// is small: tuples are most of what a reader of torch's pickles builds.
func newNode(n int) *Node {
	switch n {
	case 0:
		return &Node{}
	case 1:
		return nodeOf(func(a *[1]Item) []Item { return a[:] })
	case 2:
		return nodeOf(func(a *[2]Item) []Item { return a[:] })
	case 3:
		return nodeOf(func(a *[3]Item) []Item { return a[:] })
	case 4:
		return nodeOf(func(a *[4]Item) []Item { return a[:] })
	case 5:
		return nodeOf(func(a *[5]Item) []Item { return a[:] })
	case 6:
		return nodeOf(func(a *[6]Item) []Item { return a[:] })
	case 7:
		return nodeOf(func(a *[7]Item) []Item { return a[:] })
	case 8:
		return nodeOf(func(a *[8]Item) []Item { return a[:] })
	}
	return &Node{Items: make([]Item, n)}
}

// nodeOf allocates a Node with its items array A.
func nodeOf[A any](items func(*A) []Item) *Node {
	b := new(struct {
		Node
		a A
	})
	b.Items = items(&b.a)
	return &b.Node
}

// call is the result of fn(*args): in Graph mode an Object that holds
// them.
func (m *Machine) call(fn, args Value) Value {
	if !m.cfg.Graph {
		return Value{Kind: Object}
	}
	b := new(struct {
		Node
		c Call
	})
	b.c = Call{Func: fn, Args: args}
	b.Call = &b.c
	return Value{Kind: Object, Node: &b.Node}
}

// object is the result of cls(*items) (OBJ, INST).
func (m *Machine) object(cls Value, items []Value) Value {
	if !m.cfg.Graph {
		return Value{Kind: Object}
	}
	args := Value{Kind: Tuple, Node: newNode(len(items))}
	for i, v := range items {
		args.Node.Items[i] = Item{Role: Elem, Val: v}
	}
	return m.call(cls, args)
}

func (m *Machine) persistent(pid Value) Value {
	if m.cfg.Persistent == nil {
		return Value{}
	}
	return m.cfg.Persistent(pid)
}

func (m *Machine) pushStr(s string) {
	if m.cfg.OnStr != nil {
		m.cfg.OnStr(s)
	}
	m.push(Value{Kind: Str, Text: s})
}

func global(mod, name Value) Value {
	if mod.Kind != Str || name.Kind != Str {
		return Value{}
	}
	return Value{Kind: Global, Text: mod.Text + "\n" + name.Text}
}

// apply performs m.op with its binary argument arg.
func (m *Machine) apply(arg []byte) {
	if m.op == '.' { // STOP
		m.done = true
		if !m.broken && len(m.stack) > m.floor() {
			m.result, m.hasRes = m.stack[len(m.stack)-1], true
		}
		return
	}
	if m.broken {
		return
	}
	switch m.op {
	case '(': // MARK
		if m.cfg.Stack > 0 && len(m.marks) >= m.cfg.Stack {
			m.fail()
			return
		}
		m.marks = append(m.marks, len(m.stack))
	case '0': // POP
		if len(m.marks) > 0 && len(m.stack) == m.marks[len(m.marks)-1] {
			m.marks = m.marks[:len(m.marks)-1] // POP of a mark, as pickle allows
			return
		}
		m.pop()
	case '1': // POP_MARK
		m.popMark()
	case '2': // DUP
		if v, ok := m.top(); ok {
			m.push(v)
		}
	case 'J': // BININT
		m.push(Value{Kind: Int, Num: int64(int32(binary.LittleEndian.Uint32(arg)))})
	case 'K': // BININT1
		m.push(Value{Kind: Int, Num: int64(arg[0])})
	case 'M': // BININT2
		m.push(Value{Kind: Int, Num: int64(binary.LittleEndian.Uint16(arg))})
	case '\x8a', '\x8b': // LONG1, LONG4 (kept only when at most 8 bytes)
		m.push(Value{Kind: Int, Num: leSigned(arg)})
	case 'X', '\x8c', '\x8d', 'T', 'U': // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING
		m.pushStr(string(arg))
	case 'N':
		m.push(Value{Kind: None})
	case '\x88', '\x89': // NEWTRUE, NEWFALSE
		m.push(Value{Kind: Bool, Num: int64('\x89' - m.op)})
	case '}':
		m.push(m.container(Dict))
	case ']':
		m.push(m.container(List))
	case ')':
		m.push(m.container(Tuple))
	case 'G', '\x8f', '\x82', '\x83', '\x84', '\x97': // BINFLOAT, EMPTY_SET, EXT1/2/4, NEXT_BUFFER
		m.push(Value{})
	case '\x80', '\x95', '\x98': // PROTO, FRAME, READONLY_BUFFER
	case 'Q': // BINPERSID
		if pid, ok := m.pop(); ok {
			m.push(m.persistent(pid))
		}
	case 'R', '\x81': // REDUCE, NEWOBJ: callable or class, args
		if v, ok := m.popN(2); ok {
			m.push(m.call(v[0], v[1]))
		}
	case '\x92': // NEWOBJ_EX: class, args, kwargs
		if v, ok := m.popN(3); ok {
			o := m.call(v[0], v[1])
			addItem(o, KwArgs, v[2])
			m.push(o)
		}
	case 'b': // BUILD
		if v, ok := m.popN(1); ok {
			if t, ok := m.target(); ok {
				addItem(t, State, v[0])
			}
		}
	case 'a': // APPEND
		if v, ok := m.popN(1); ok {
			if t, ok := m.target(); ok {
				appendItems(t, v[:1])
			}
		}
	case 's': // SETITEM
		if v, ok := m.popN(2); ok {
			if t, ok := m.target(); ok {
				setItems(t, v[:2])
			}
		}
	case 'e', 'u', '\x90': // APPENDS, SETITEMS, ADDITEMS
		if items, ok := m.popMark(); ok {
			if t, ok := m.target(); ok && m.op == 'e' {
				appendItems(t, items)
			} else if ok && m.op == 'u' {
				setItems(t, items)
			} // a set's members have no place in the graph
		}
	case 'd': // DICT
		if items, ok := m.popMark(); ok {
			d := m.container(Dict)
			setItems(d, items)
			m.push(d)
		}
	case 'l': // LIST
		if items, ok := m.popMark(); ok {
			l := m.container(List)
			appendItems(l, items)
			m.push(l)
		}
	case '\x91': // FROZENSET
		if _, ok := m.popMark(); ok {
			m.push(Value{})
		}
	case 'o': // OBJ: class and args above the mark
		if items, ok := m.popMark(); ok {
			var cls Value
			if len(items) > 0 {
				cls, items = items[0], items[1:]
			}
			m.push(m.object(cls, items))
		}
	case 't': // TUPLE
		if items, ok := m.popMark(); ok {
			m.push(m.tuple(items))
		}
	case '\x85', '\x86', '\x87': // TUPLE1, TUPLE2, TUPLE3
		n := int(m.op - '\x84')
		if len(m.stack)-n < m.floor() {
			m.fail()
			return
		}
		items := m.stack[len(m.stack)-n:]
		m.stack = m.stack[:len(m.stack)-n]
		m.push(m.tuple(items))
	case '\x93': // STACK_GLOBAL
		if v, ok := m.popN(2); ok {
			m.push(global(v[0], v[1]))
		}
	case '\x94': // MEMOIZE
		m.memoPut(m.memoN)
	case 'h': // BINGET
		m.memoGet(uint32(arg[0]))
	case 'j': // LONG_BINGET
		m.memoGet(binary.LittleEndian.Uint32(arg))
	case 'q': // BINPUT
		m.memoPut(uint32(arg[0]))
	case 'r': // LONG_BINPUT
		m.memoPut(binary.LittleEndian.Uint32(arg))
	default: // '3'
		m.fail()
	}
}

// applyLine performs a text opcode (protocol 0's, GLOBAL's and INST's).
func (m *Machine) applyLine(l1, l2 string) {
	if m.broken {
		return
	}
	switch m.op {
	case 'c': // GLOBAL
		m.push(Value{Kind: Global, Text: l1 + "\n" + l2})
	case 'i': // INST
		if items, ok := m.popMark(); ok {
			m.push(m.object(Value{Kind: Global, Text: l1 + "\n" + l2}, items))
		}
	case 'I', 'L': // INT, LONG
		n, err := strconv.ParseInt(strings.TrimSuffix(l2, "L"), 10, 64)
		if err != nil {
			m.push(Value{}) // True/False spelled 01/00 parse (as ints); anything else is Other
			return
		}
		m.push(Value{Kind: Int, Num: n})
	case 'g', 'p': // GET, PUT
		n, err := strconv.ParseUint(l2, 10, 32)
		if err != nil {
			m.fail()
			return
		}
		if m.op == 'g' {
			m.memoGet(uint32(n))
		} else {
			m.memoPut(uint32(n))
		}
	case 'V': // UNICODE, raw-unicode-escape: plain text unless it holds a backslash
		if strings.IndexByte(l2, '\\') < 0 && l2 != "\x00" {
			m.pushStr(l2)
			return
		}
		m.push(Value{})
	case 'S': // STRING, a quoted repr: plain when quoted simply and free of escapes
		if len(l2) >= 2 && (l2[0] == '\'' || l2[0] == '"') && l2[len(l2)-1] == l2[0] &&
			strings.IndexByte(l2, '\\') < 0 {
			m.pushStr(l2[1 : len(l2)-1])
			return
		}
		m.push(Value{})
	case 'P': // PERSID
		pid := Value{}
		if l2 != "\x00" {
			pid = Value{Kind: Str, Text: l2}
		}
		m.push(m.persistent(pid))
	default: // 'F': FLOAT
		m.push(Value{})
	}
}

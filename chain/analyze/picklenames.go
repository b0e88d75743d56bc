package analyze

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
)

// pickleStorageNames walks a torch.save pickle (data.pkl) and names its
// storages: for each persistent id ('storage', type, key, location, numel)
// it returns the first dict-key path that reaches it, e.g. key "17" ->
// "model.layer1.weight" or "state.3.exp_avg".
//
// It builds the object graph the opcodes describe (dicts, lists, tuples,
// calls, persistent ids; other values are opaque) and walks it depth first
// in insertion order, so "first" is the order the writer serialised the
// state dict in. It knows the binary opcodes of protocols 1..4 (torch.save
// writes protocol 2); on anything else (protocol 0's text opcodes, protocol
// 5's buffers) or on malformed input it stops and names what it has read
// (see salvage). It never panics, and its work is about linear in len(p).
func pickleStorageNames(p []byte) map[string]string {
	m := pickleMachine{p: p, memo: map[uint32]*pnode{}}
	roots := m.run()
	names := map[string]string{}
	walkNames(roots, names)
	return names
}

type pnodeKind uint8

const (
	pnOther  pnodeKind = iota
	pnStr              // s
	pnInt              // i
	pnBool             // i: 0 or 1
	pnNone             //
	pnGlobal           // s = module + "." + name
	pnPers             // s = storage key
	pnDict             // kids named by keys
	pnList             // kids named by index
	pnTuple            // kids named by index
	pnObject           // REDUCE/NEWOBJ result: args unnamed, then items set on it, then BUILD state
)

type pnode struct {
	kind pnodeKind
	s    string
	i    int64
	kids []pkid
}

type pkid struct {
	name string // path component; "" adds none
	n    *pnode
}

var (
	pOther = &pnode{kind: pnOther}
	pNone  = &pnode{kind: pnNone}
	pTrue  = &pnode{kind: pnBool, i: 1}
	pFalse = &pnode{kind: pnBool, i: 0}
)

// keyName is how a dict key reads in a path.
func keyName(k *pnode) string {
	switch k.kind {
	case pnStr:
		if len(k.s) > keyNameCap {
			return k.s[:keyNameCap] + "…"
		}
		return k.s
	case pnInt:
		return strconv.FormatInt(k.i, 10)
	case pnBool:
		if k.i != 0 {
			return "True"
		}
		return "False"
	case pnNone:
		return "None"
	}
	return "?"
}

type pickleMachine struct {
	p     []byte
	pos   int
	stack []*pnode
	marks []int
	memo  map[uint32]*pnode
	bad   bool
}

// run interprets p until STOP and returns the pickled object, or, when it
// gives up, the object under construction (see salvage).
func (m *pickleMachine) run() []*pnode {
	for !m.bad && m.pos < len(m.p) {
		op := m.p[m.pos]
		m.pos++
		if op == '.' { // STOP
			if v := m.pop(); v != nil {
				return []*pnode{v}
			}
			break
		}
		m.step(op)
	}
	return m.salvage()
}

// salvage finishes the SETITEMS and APPENDS left open when the machine gave
// up, innermost first, so the items already read keep their full paths
// (a storage under the root dict's "optimizer" is not named from its inner
// dict), and returns the bottom of the stack: the root being built.
func (m *pickleMachine) salvage() []*pnode {
	for len(m.marks) > 0 {
		k := m.marks[len(m.marks)-1]
		m.marks = m.marks[:len(m.marks)-1]
		if k == 0 || k > len(m.stack) {
			break
		}
		items := m.stack[k:]
		switch t := m.stack[k-1]; t.kind {
		case pnDict, pnObject:
			setItems(t, items[:len(items)&^1])
		case pnList:
			appendItems(t, items)
		}
		m.stack = m.stack[:k]
	}
	if len(m.stack) == 0 {
		return nil
	}
	return m.stack[:1]
}

// step performs one opcode; anything it does not know sets m.bad.
func (m *pickleMachine) step(op byte) {
	switch op {
	case 0x80: // PROTO
		m.take(1)
	case 0x95: // FRAME
		m.take(8)
	case '}':
		m.push(&pnode{kind: pnDict})
	case ']':
		m.push(&pnode{kind: pnList})
	case ')':
		m.push(&pnode{kind: pnTuple})
	case 0x8f: // EMPTY_SET
		m.push(pOther)
	case '(': // MARK
		m.marks = append(m.marks, len(m.stack))
	case 'N':
		m.push(pNone)
	case 0x88:
		m.push(pTrue)
	case 0x89:
		m.push(pFalse)
	case 'K': // BININT1
		if b := m.take(1); b != nil {
			m.push(&pnode{kind: pnInt, i: int64(b[0])})
		}
	case 'M': // BININT2
		if b := m.take(2); b != nil {
			m.push(&pnode{kind: pnInt, i: int64(binary.LittleEndian.Uint16(b))})
		}
	case 'J': // BININT
		if b := m.take(4); b != nil {
			m.push(&pnode{kind: pnInt, i: int64(int32(binary.LittleEndian.Uint32(b)))})
		}
	case 0x8a, 0x8b: // LONG1, LONG4
		if b := m.data(op); b != nil {
			if len(b) <= 8 {
				m.push(&pnode{kind: pnInt, i: leSigned(b)})
			} else {
				m.push(pOther)
			}
		}
	case 'G': // BINFLOAT
		if m.take(8) != nil {
			m.push(pOther)
		}
	case 'X', 0x8c, 0x8d, 'T', 'U': // BINUNICODE(8), SHORT_BINUNICODE, BINSTRING, SHORT_BINSTRING
		if b := m.data(op); b != nil {
			m.push(&pnode{kind: pnStr, s: string(b)})
		}
	case 'B', 'C', 0x8e: // BINBYTES, SHORT_BINBYTES, BINBYTES8
		if m.data(op) != nil {
			m.push(pOther)
		}
	case 'c': // GLOBAL
		mod, ok1 := m.line()
		name, ok2 := m.line()
		if ok1 && ok2 {
			m.push(&pnode{kind: pnGlobal, s: mod + "." + name})
		}
	case 0x93: // STACK_GLOBAL
		name, mod := m.pop(), m.pop()
		if mod != nil && name != nil {
			m.push(&pnode{kind: pnGlobal, s: mod.s + "." + name.s})
		}
	case 'Q': // BINPERSID
		if pid := m.pop(); pid != nil {
			m.push(persistent(pid))
		}
	case 't':
		if items, ok := m.popMark(); ok {
			m.push(tuple(items))
		}
	case 0x85, 0x86, 0x87: // TUPLE1..3
		n := int(op - 0x84)
		if len(m.stack)-n < m.floor() {
			m.bad = true
			return
		}
		items := m.stack[len(m.stack)-n:]
		m.stack = m.stack[:len(m.stack)-n]
		m.push(tuple(items))
	case 'R', 0x81: // REDUCE, NEWOBJ: callable/class, args
		args, fn := m.pop(), m.pop()
		if fn != nil && args != nil {
			m.push(call(fn, args))
		}
	case 0x92: // NEWOBJ_EX: class, args, kwargs
		kw, args, cls := m.pop(), m.pop(), m.pop()
		if cls != nil && args != nil && kw != nil {
			o := call(cls, args)
			addKid(o, "", kw)
			m.push(o)
		}
	case 'd': // DICT
		if items, ok := m.popMark(); ok {
			d := &pnode{kind: pnDict}
			setItems(d, items)
			m.push(d)
		}
	case 'l': // LIST
		if items, ok := m.popMark(); ok {
			l := &pnode{kind: pnList}
			appendItems(l, items)
			m.push(l)
		}
	case 0x91: // FROZENSET
		if _, ok := m.popMark(); ok {
			m.push(pOther)
		}
	case 's': // SETITEM
		v, k := m.pop(), m.pop()
		if t := m.peek(); t != nil && v != nil {
			setItems(t, []*pnode{k, v})
		}
	case 'u': // SETITEMS
		if items, ok := m.popMark(); ok {
			if t := m.peek(); t != nil {
				setItems(t, items)
			}
		}
	case 'a': // APPEND
		v := m.pop()
		if t := m.peek(); t != nil && v != nil {
			appendItems(t, []*pnode{v})
		}
	case 'e': // APPENDS
		if items, ok := m.popMark(); ok {
			if t := m.peek(); t != nil {
				appendItems(t, items)
			}
		}
	case 0x90: // ADDITEMS: a set's members have no names
		if _, ok := m.popMark(); ok {
			m.peek()
		}
	case 'b': // BUILD: the state's keys name what they hold, as attributes
		st := m.pop()
		if t := m.peek(); t != nil && st != nil {
			addKid(t, "", st)
		}
	case '0': // POP
		if len(m.marks) > 0 && len(m.stack) == m.marks[len(m.marks)-1] {
			m.marks = m.marks[:len(m.marks)-1]
		} else {
			m.pop()
		}
	case '1': // POP_MARK
		m.popMark()
	case '2': // DUP
		if t := m.peek(); t != nil {
			m.push(t)
		}
	case 0x94: // MEMOIZE
		if t := m.peek(); t != nil {
			m.memo[uint32(len(m.memo))] = t
		}
	case 'q': // BINPUT
		if b := m.take(1); b != nil {
			m.put(uint32(b[0]))
		}
	case 'r': // LONG_BINPUT
		if b := m.take(4); b != nil {
			m.put(binary.LittleEndian.Uint32(b))
		}
	case 'h': // BINGET
		if b := m.take(1); b != nil {
			m.get(uint32(b[0]))
		}
	case 'j': // LONG_BINGET
		if b := m.take(4); b != nil {
			m.get(binary.LittleEndian.Uint32(b))
		}
	default:
		m.bad = true
	}
}

// take returns the next n argument bytes, or nil (and gives up) past the end.
func (m *pickleMachine) take(n int) []byte {
	if n > len(m.p)-m.pos {
		m.bad = true
		return nil
	}
	b := m.p[m.pos : m.pos+n]
	m.pos += n
	return b
}

// data returns a length-prefixed argument (never nil when it succeeds).
func (m *pickleMachine) data(op byte) []byte {
	var n uint64
	switch op {
	case 0x8c, 'U', 'C', 0x8a:
		b := m.take(1)
		if b == nil {
			return nil
		}
		n = uint64(b[0])
	case 0x8d, 0x8e:
		b := m.take(8)
		if b == nil {
			return nil
		}
		n = binary.LittleEndian.Uint64(b)
	default:
		b := m.take(4)
		if b == nil {
			return nil
		}
		n = uint64(binary.LittleEndian.Uint32(b))
	}
	if n > uint64(len(m.p)-m.pos) {
		m.bad = true
		return nil
	}
	return m.take(int(n))[:n:n]
}

// line returns a newline-terminated argument without its newline.
func (m *pickleMachine) line() (string, bool) {
	i := bytes.IndexByte(m.p[m.pos:min(len(m.p), m.pos+4096)], '\n')
	if i < 0 {
		m.bad = true
		return "", false
	}
	s := string(m.p[m.pos : m.pos+i])
	m.pos += i + 1
	return s, true
}

func (m *pickleMachine) push(n *pnode) { m.stack = append(m.stack, n) }

// floor is the lowest stack index the current mark lets an opcode pop.
func (m *pickleMachine) floor() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *pickleMachine) pop() *pnode {
	if m.bad || len(m.stack) <= m.floor() {
		m.bad = true
		return nil
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v
}

func (m *pickleMachine) peek() *pnode {
	if m.bad || len(m.stack) <= m.floor() {
		m.bad = true
		return nil
	}
	return m.stack[len(m.stack)-1]
}

// popMark pops everything above the topmost mark, and the mark.
func (m *pickleMachine) popMark() ([]*pnode, bool) {
	if m.bad || len(m.marks) == 0 {
		m.bad = true
		return nil, false
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := m.stack[k:]
	m.stack = m.stack[:k]
	return items, true
}

func (m *pickleMachine) put(i uint32) {
	if t := m.peek(); t != nil {
		m.memo[i] = t
	}
}

func (m *pickleMachine) get(i uint32) {
	v, ok := m.memo[i]
	if !ok {
		m.bad = true
		return
	}
	m.push(v)
}

// tuple names its elements by index: {"x": (t1, t2)} names x.0 and x.1.
func tuple(items []*pnode) *pnode {
	t := &pnode{kind: pnTuple, kids: make([]pkid, len(items))}
	for i, v := range items {
		t.kids[i] = pkid{name: strconv.Itoa(i), n: v}
	}
	return t
}

// call is what fn(*args) returns. The arguments add nothing to a path:
// _rebuild_tensor_v2(storage, ...) under "fc.weight" names its storage
// "fc.weight".
func call(fn, args *pnode) *pnode {
	o := &pnode{kind: pnObject, s: fn.s}
	if args.kind == pnTuple {
		for _, k := range args.kids {
			o.kids = append(o.kids, pkid{n: k.n})
		}
	} else {
		o.kids = append(o.kids, pkid{n: args})
	}
	return o
}

// persistent is what torch's persistent_load returns for pid: a storage
// reference when pid is ('storage', type, key, ...), else an opaque value.
func persistent(pid *pnode) *pnode {
	k := pid.kids
	if pid.kind != pnTuple || len(k) < 3 || k[0].n.kind != pnStr || k[0].n.s != "storage" || k[2].n.kind != pnStr {
		return pOther
	}
	return &pnode{kind: pnPers, s: k[2].n.s}
}

// setItems adds key/value pairs to a dict, or to an object (an OrderedDict
// is REDUCE'd, then filled).
func setItems(t *pnode, kv []*pnode) {
	if t.kind != pnDict && t.kind != pnObject {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		addKid(t, keyName(kv[i]), kv[i+1])
	}
}

func appendItems(t *pnode, items []*pnode) {
	if t.kind != pnList && t.kind != pnObject {
		return
	}
	for _, v := range items {
		addKid(t, strconv.Itoa(len(t.kids)), v)
	}
}

// addKid adds a child, except to the shared scalar nodes.
func addKid(t *pnode, name string, v *pnode) {
	switch t.kind {
	case pnDict, pnList, pnTuple, pnObject:
		t.kids = append(t.kids, pkid{name: name, n: v})
	}
}

// Limits of what a name may cost: deeper or longer paths are not followed,
// and past namesBytes of names the walk stops naming.
const (
	pathDepthCap = 64
	keyNameCap   = 256
	namesBytes   = 16 << 20
)

// pathSeg is one component of a path, linked to its parent so a walk costs
// no string building until a storage is named.
type pathSeg struct {
	name   string
	parent *pathSeg
	depth  int
}

func (s *pathSeg) String() string {
	parts := make([]string, 0, pathDepthCap)
	for ; s != nil; s = s.parent {
		parts = append(parts, s.name)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
		if i > 0 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// walkNames records, for each storage the roots reach, the first path that
// reaches it, depth first in insertion order. Each node is entered once, so
// shared and cyclic graphs cost their size.
func walkNames(roots []*pnode, names map[string]string) {
	type frame struct {
		n    *pnode
		path *pathSeg
	}
	seen := map[*pnode]bool{}
	used := map[string]bool{} // paths given: one object may hold two storages
	var todo []frame
	for i := len(roots) - 1; i >= 0; i-- {
		todo = append(todo, frame{n: roots[i]})
	}
	size := 0
	for len(todo) > 0 && size < namesBytes {
		f := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[f.n] {
			continue
		}
		seen[f.n] = true
		if f.n.kind == pnPers {
			if _, ok := names[f.n.s]; !ok && f.path != nil {
				p := f.path.String()
				if used[p] {
					p += "#" + f.n.s
				}
				used[p] = true
				names[f.n.s] = p
				size += len(f.n.s) + len(p)
			}
			continue
		}
		for i := len(f.n.kids) - 1; i >= 0; i-- {
			k := f.n.kids[i]
			p := f.path
			if k.name != "" {
				if p != nil && p.depth >= pathDepthCap {
					continue // no real state dict nests this deep
				}
				p = &pathSeg{name: k.name, parent: p}
				if p.parent != nil {
					p.depth = p.parent.depth + 1
				}
			}
			todo = append(todo, frame{n: k.n, path: p})
		}
	}
}

// leSigned decodes a little-endian two's-complement integer of up to 8 bytes.
func leSigned(b []byte) int64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if n := len(b); n > 0 && n < 8 && b[n-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * uint(n))
	}
	return int64(u)
}

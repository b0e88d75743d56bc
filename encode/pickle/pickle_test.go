package pickle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// pk is a tiny pickle writer for hand-made pickles.
type pk []byte

func (p pk) op(b ...byte) pk { return append(p, b...) }

func (p pk) txt(s string) pk { return append(p, s...) }

// str appends BINUNICODE s.
func (p pk) str(s string) pk {
	p = binary.LittleEndian.AppendUint32(append(p, 'X'), uint32(len(s)))
	return append(p, s...)
}

// sbu appends SHORT_BINUNICODE s.
func (p pk) sbu(s string) pk { return append(append(p, 0x8c, byte(len(s))), s...) }

func (p pk) global(mod, name string) pk { return append(p, "c"+mod+"\n"+name+"\n"...) }

// storagePid appends a persistent id ('storage', torch.<typ>, key, 'cpu', numel)
// and BINPERSID.
func (p pk) storagePid(typ, key string, numel uint32) pk {
	p = p.op('(').str("storage").global("torch", typ).str(key).str("cpu").op('J')
	return pk(binary.LittleEndian.AppendUint32(p, numel)).op('t', 'Q')
}

// storages is a Persistent hook in the manner of torch's persistent_load:
// it records the keys of ('storage', type, key, location, numel) ids.
type storages struct{ keys, other []string }

func (s *storages) load(pid Value) Value {
	t := pid.Items()
	if pid.Kind == Tuple && len(t) >= 5 && t[0].Val.Kind == Str && t[0].Val.Text == "storage" && t[2].Val.Kind == Str {
		s.keys = append(s.keys, t[2].Val.Text)
		return Value{Kind: Pers, Text: t[2].Val.Text, Node: &Node{}}
	}
	s.other = append(s.other, pid.Kind.String()+":"+pid.Text)
	return Value{}
}

// run feeds p (in pieces of piece bytes; 0: whole) to a new Machine.
func run(t testing.TB, c Config, p []byte, piece int) (*Machine, int) {
	t.Helper()
	m := New(c)
	n := 0
	for q := p; len(q) > 0 && !m.Done() && !m.Dead(); {
		k := len(q)
		if piece > 0 {
			k = min(piece, k)
		}
		got := m.Feed(q[:k])
		n += got
		if got < k {
			break
		}
		q = q[k:]
	}
	return m, n
}

// entry returns the value of dict (or object) v's entry key.
func entry(t *testing.T, v Value, key string) Value {
	t.Helper()
	for _, it := range v.Items() {
		if it.Role == Entry && it.Key.Kind == Str && it.Key.Text == key {
			return it.Val
		}
	}
	t.Fatalf("no entry %q in %v of %d items", key, v.Kind, len(v.Items()))
	return Value{}
}

// elems returns the values of v's items of role r.
func elems(v Value, r Role) []Value {
	var out []Value
	for _, it := range v.Items() {
		if it.Role == r {
			out = append(out, it.Val)
		}
	}
	return out
}

func fixture(t *testing.T, proto int) []byte {
	t.Helper()
	p, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("checkpoint-p%d.pkl", proto)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckpointProtocols reads CPython's pickles of one checkpoint-like
// object in each protocol 0..5 (every opcode CPython writes), in Graph and
// bounded mode, whole and a byte at a time.
func TestCheckpointProtocols(t *testing.T) {
	for proto := 0; proto <= 5; proto++ {
		p := fixture(t, proto)
		for _, graph := range []bool{true, false} {
			for _, piece := range []int{0, 1, 7} {
				name := fmt.Sprintf("p%d/graph=%v/piece=%d", proto, graph, piece)
				var st storages
				c := Config{Graph: graph, Persistent: st.load}
				if !graph {
					c.Limits = Bounded
				}
				m, n := run(t, c, append(slices.Clip(p), "trailing"...), piece)
				if n != len(p) || !m.Done() || m.Dead() || m.Broken() {
					t.Fatalf("%s: consumed %d of %d, done %v, dead %v, broken %v", name, n, len(p), m.Done(), m.Dead(), m.Broken())
				}
				root, ok := m.Result()
				if !ok || root.Kind != Dict {
					t.Fatalf("%s: result %v %v", name, root.Kind, ok)
				}
				if proto == 0 {
					// Protocol 0 writes persistent ids as text (PERSID): the
					// hook gets a Str, which torch could not load either.
					if len(st.keys) != 0 || len(st.other) != 4 || !strings.HasPrefix(st.other[0], "str:('storage', <class 'torch.FloatStorage'>, '0'") {
						t.Fatalf("%s: keys %q, other %q", name, st.keys, st.other)
					}
				} else if want := []string{"0", "1", "2", "3"}; !slices.Equal(st.keys, want) || len(st.other) != 0 {
					t.Fatalf("%s: storage keys %q, want %q; other %q", name, st.keys, want, st.other)
				}
				if graph {
					checkCheckpointGraph(t, name, proto, root)
				}
			}
		}
	}
}

// checkCheckpointGraph checks the object gen_fixtures.py pickled.
func checkCheckpointGraph(t *testing.T, name string, proto int, root Value) {
	model := entry(t, root, "model")
	if mod, fn, _ := model.Node.Call.Func.Global(); model.Kind != Object || mod != "collections" || fn != "OrderedDict" {
		t.Fatalf("%s: model is %v %s.%s", name, model.Kind, mod, fn)
	}
	w := entry(t, model, "fc.weight")
	if mod, fn, _ := w.Node.Call.Func.Global(); w.Kind != Object || mod != "torch._utils" || fn != "_rebuild_tensor_v2" {
		t.Fatalf("%s: fc.weight is %v %s.%s", name, w.Kind, mod, fn)
	}
	args := w.Args()
	if len(args) != 6 || args[2].Kind != Tuple || len(args[2].Items()) != 1 || args[2].Items()[0].Val.Num != 6 {
		t.Fatalf("%s: fc.weight's args %+v", name, args)
	}
	if proto > 0 && (args[0].Kind != Pers || args[0].Text != "0") {
		t.Fatalf("%s: fc.weight's storage %+v", name, args[0])
	}
	if tied := entry(t, root, "tied"); tied.Node != w.Node {
		t.Errorf("%s: tied is not fc.weight", name)
	}
	half := entry(t, model, "half")
	if a := half.Args(); len(a) != 7 || a[4].Kind != Global || a[4].Text != "torch\nfloat16" {
		t.Errorf("%s: half's args %+v", name, a)
	}
	exp := entry(t, entry(t, root, "optimizer"), "state")
	if it := exp.Items(); len(it) != 1 || it[0].Key.Kind != Int || it[0].Key.Num != 3 {
		t.Fatalf("%s: optimizer.state %+v", name, it)
	}
	if step := entry(t, exp.Items()[0].Val, "step"); step.Kind != Other {
		t.Errorf("%s: step 10**30 is %v", name, step.Kind)
	}

	misc := entry(t, root, "misc")
	e := elems(misc, Elem)
	if misc.Kind != List || len(e) != 12 {
		t.Fatalf("%s: misc %v of %d", name, misc.Kind, len(e))
	}
	wantBool := Bool
	if proto < 2 {
		wantBool = Int // INT 01 and 00: True and False, read as ints
	}
	want := []Value{{Kind: None}, {Kind: wantBool, Num: 1}, {Kind: wantBool, Num: 0},
		{Kind: Int, Num: -1}, {Kind: Int, Num: 300}, {Kind: Int, Num: -70000}, {Kind: Int, Num: 1 << 40}}
	for i, w := range want {
		if e[i] != w {
			t.Errorf("%s: misc[%d] = %+v, want %+v", name, i, e[i], w)
		}
	}
	if proto > 0 && (e[7].Kind != Str || e[7].Text != "é\\x") {
		t.Errorf("%s: misc[7] = %+v", name, e[7]) // protocol 0: escaped text, Other
	}
	point := e[11]
	if st := elems(point, State); point.Kind != Object || len(st) != 1 || entry(t, st[0], "x").Num != 1 {
		t.Errorf("%s: Point %+v", name, point)
	}

	if t3 := entry(t, root, "t3"); t3.Kind != Tuple || len(t3.Items()) != 3 || t3.Items()[2].Val.Num != 3 {
		t.Errorf("%s: t3 %+v", name, t3)
	}
	if l := entry(t, root, "long"); l.Kind != Other {
		t.Errorf("%s: a 264-byte long is %v", name, l.Kind)
	}
	many := elems(entry(t, root, "many"), Elem)
	if len(many) != 260 || many[259].Text != "s259" {
		t.Errorf("%s: many: %d", name, len(many))
	}
	if a, b := entry(t, root, "late"), entry(t, root, "late again"); a.Kind != List || a.Node != b.Node {
		t.Errorf("%s: late %v is not late again", name, a.Kind)
	}
	wantExt := Other // EXT1, EXT2, EXT4 from protocol 2; GLOBALs before
	if proto < 2 {
		wantExt = Global
	}
	if ext := elems(entry(t, root, "ext"), Elem); len(ext) != 3 || ext[0].Kind != wantExt || ext[2].Kind != wantExt {
		t.Errorf("%s: ext %+v", name, ext)
	}
	// rec = (l,) with l = [rec]: a cycle through the memo.
	rec := entry(t, root, "rec")
	if rec.Kind != Tuple || len(rec.Items()) != 1 {
		t.Fatalf("%s: rec %+v", name, rec)
	}
	if l := rec.Items()[0].Val; l.Kind != List || len(l.Items()) != 1 || l.Items()[0].Val.Node != rec.Node {
		t.Errorf("%s: rec[0] %+v", name, l)
	}
	if proto >= 4 {
		kw := entry(t, root, "kw")
		if mod, fn, _ := kw.Node.Call.Func.Global(); kw.Kind != Object || mod != "__main__" || fn != "Kw" {
			t.Errorf("%s: kw is %v %s.%s", name, kw.Kind, mod, fn)
		}
		if a, k := kw.Args(), elems(kw, KwArgs); len(a) != 1 || a[0].Num != 1 || len(k) != 1 || entry(t, k[0], "k").Text != "v" {
			t.Errorf("%s: kw args %+v kwargs %+v", name, a, k)
		}
	}
	if proto >= 5 {
		for _, k := range []string{"buf", "ro", "ba"} {
			if v := entry(t, root, k); v.Kind != Other {
				t.Errorf("%s: %s is %v", name, k, v.Kind)
			}
		}
	}
}

// TestRareOpcodes covers the opcodes CPython 3 does not write: STRING,
// BINSTRING, SHORT_BINSTRING, BINUNICODE8, BINBYTES8, LONG4, DUP, INST,
// OBJ, POP_MARK, PERSID, and protocol 0's text PUT and GET.
func TestRareOpcodes(t *testing.T) {
	p := pk{0x80, 4, '('}
	p = p.op('S').txt("'quoted'\n")                     // STRING
	p = p.op('S').txt(`"esc\n"` + "\n")                 // STRING with an escape: Other
	p = p.op('T', 3, 0, 0, 0).txt("bin")                // BINSTRING
	p = p.op('U', 5).txt("short")                       // SHORT_BINSTRING
	p = p.op(0x8d, 4, 0, 0, 0, 0, 0, 0, 0).txt("wide")  // BINUNICODE8
	p = p.op(0x8e, 2, 0, 0, 0, 0, 0, 0, 0).txt("..")    // BINBYTES8
	p = p.op(0x8b, 2, 0, 0, 0, 0xff, 0x7f)              // LONG4 32767
	p = p.op(0x8a, 1, 0xff)                             // LONG1 -1
	p = p.op('I').txt("-12\n").op('L').txt("34L\n")     // INT, LONG
	p = p.op('F').txt("1.5\n")                          // FLOAT
	p = p.op('V').txt("plain\n").op('p').txt("7\n")     // UNICODE, PUT 7
	p = p.op('0', 'g').txt("7\n")                       // POP, GET 7
	p = p.op('K', 9, '2')                               // DUP
	p = p.op('(', 'K', 1, 'K', 2).op('i').txt("m\nC\n") // INST m.C(1, 2)
	p = p.op('(').global("m", "D").op('K', 3, 'o')      // OBJ m.D(3)
	p = p.op('(', 'K', 4, 'K', 5, '1')                  // POP_MARK
	p = p.op('P').txt("pid\n")                          // PERSID
	p = p.op(0x82, 1, 0x83, 1, 1, 0x84, 1, 1, 1, 0)     // EXT1, EXT2, EXT4
	p = p.op('l', '.')
	var st storages
	m, n := run(t, Config{Graph: true, Persistent: st.load}, p, 0)
	v, ok := m.Result()
	if n != len(p) || !ok || m.Broken() || v.Kind != List {
		t.Fatalf("consumed %d of %d, result %v %v, broken %v", n, len(p), v.Kind, ok, m.Broken())
	}
	got := elems(v, Elem)
	want := []Value{
		{Kind: Str, Text: "quoted"}, {}, {Kind: Str, Text: "bin"}, {Kind: Str, Text: "short"},
		{Kind: Str, Text: "wide"}, {}, {Kind: Int, Num: 32767}, {Kind: Int, Num: -1},
		{Kind: Int, Num: -12}, {Kind: Int, Num: 34}, {}, {Kind: Str, Text: "plain"},
		{Kind: Int, Num: 9}, {Kind: Int, Num: 9},
	}
	if len(got) != len(want)+6 {
		t.Fatalf("%d elements: %+v", len(got), got)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("element %d: %+v, want %+v", i, got[i], w)
		}
	}
	inst, obj := got[len(want)], got[len(want)+1]
	if mod, name, _ := inst.Node.Call.Func.Global(); inst.Kind != Object || mod != "m" || name != "C" || len(inst.Args()) != 2 {
		t.Errorf("INST: %+v", inst)
	}
	if mod, name, _ := obj.Node.Call.Func.Global(); obj.Kind != Object || mod != "m" || name != "D" || obj.Args()[0].Num != 3 {
		t.Errorf("OBJ: %+v", obj)
	}
	if !slices.Equal(st.other, []string{"str:pid"}) {
		t.Errorf("PERSID: %q", st.other)
	}
	for i, x := range got[len(want)+2:] {
		if x.Kind != Other {
			t.Errorf("PERSID, EXT: element %d is %v", i, x.Kind)
		}
	}
}

// A protocol-4 pickle as newer Pythons write it: FRAME, MEMOIZE, STACK_GLOBAL,
// short strings, a memo fetch for the second persistent id, and bytes that
// hold STOP.
func TestProtocol4Framing(t *testing.T) {
	p := pk{0x80, 4, 0x95}
	p = binary.LittleEndian.AppendUint64(p, 999) // FRAME length: ignored
	p = p.op('(').sbu("storage").op(0x94)        // memo 0
	p = p.sbu("torch").op(0x94).sbu("HalfStorage").op(0x94, 0x93, 0x94)
	p = p.sbu("k0").sbu("cpu").op('M', 0x00, 0x01, 't', 'Q')
	p = p.op('(', 'h', 0, 'h', 3).sbu("k1").sbu("cpu").op('K', 7, 't', 'Q')
	p = p.op('B', 3, 0, 0, 0, '.', '.', '.') // BINBYTES holding STOP bytes
	p = p.op(0x86, '.')
	for _, piece := range []int{0, 1, 2, 5} {
		var st storages
		m, n := run(t, Config{Limits: Bounded, Persistent: st.load}, append(slices.Clip(p), "trailing"...), piece)
		if n != len(p) || !m.Done() || !slices.Equal(st.keys, []string{"k0", "k1"}) {
			t.Fatalf("piece %d: consumed %d of %d, done %v, keys %q", piece, n, len(p), m.Done(), st.keys)
		}
		// The memo keeps strings and globals, not tuples.
		if g, _ := m.memoAt(3); g.Kind != Global || g.Text != "torch\nHalfStorage" {
			t.Fatalf("memo 3: %+v", g)
		}
	}
}

func TestCapsKeepFraming(t *testing.T) {
	// More marks than the stack limit, then a persistent id: the machine
	// stops interpreting but still finds STOP.
	p := append(pk{0x80, 2}, bytes.Repeat([]byte{'('}, Bounded.Stack+10)...)
	p = p.storagePid("FloatStorage", "0", 1).op('.')
	var st storages
	m, n := run(t, Config{Limits: Bounded, Persistent: st.load}, p, 0)
	if n != len(p) || !m.Done() || !m.Broken() || len(st.keys)+len(st.other) != 0 || m.stack != nil {
		t.Errorf("consumed %d of %d, done %v, broken %v, pids %d, stack %d", n, len(p), m.Done(), m.Broken(), len(st.keys), len(m.stack))
	}

	// A huge BINBYTES8 is passed over without being kept.
	p = pk{0x80, 4, 0x8e}
	p = binary.LittleEndian.AppendUint64(p, 1<<40)
	m = New(Config{Limits: Bounded})
	m.Feed(p)
	m.Feed(make([]byte, 1<<20))
	if m.Done() || m.st != psData || cap(m.buf) > Bounded.Str*2 {
		t.Errorf("state %v, buffer cap %d", m.st, cap(m.buf))
	}

	// A long string is pushed as Other, not kept; so is a long line.
	p = binary.LittleEndian.AppendUint32(pk{0x80, 2, 'X'}, uint32(Bounded.Str+1))
	p = append(p, make([]byte, Bounded.Str+1)...)
	p = p.op('V').txt(strings.Repeat("v", Bounded.Line+1)+"\n").op(0x86, '.')
	var strs []string
	m, n = run(t, Config{Limits: Bounded, OnStr: func(s string) { strs = append(strs, s) }}, p, 0)
	v, _ := m.Result()
	if n != len(p) || !m.Done() || len(strs) != 0 || v.Kind != Tuple || v.Items()[0].Val.Kind != Other || v.Items()[1].Val.Kind != Other {
		t.Errorf("long strings: consumed %d, done %v, strs %d, result %+v", n, m.Done(), len(strs), v)
	}

	// Past the memo's limit, GETs read as Other.
	p = pk{0x80, 2}
	for i := 0; i <= Bounded.Memo; i++ {
		p = pk(binary.LittleEndian.AppendUint32(p.op('K', 1, 'r'), uint32(i))).op('0')
	}
	p = pk(binary.LittleEndian.AppendUint32(p.op('j'), uint32(Bounded.Memo))).op('.')
	m, _ = run(t, Config{Limits: Bounded}, p, 0)
	if v, ok := m.Result(); !ok || v.Kind != Other || len(m.memo) != Bounded.Memo {
		t.Errorf("memo past its limit: %+v, memo %d", v, len(m.memo))
	}
}

func TestDeadOnUnknownOpcode(t *testing.T) {
	m := New(Config{Limits: Bounded})
	if n := m.Feed([]byte{0x80, 2, 0xff, '.'}); n != 3 || !m.Dead() || m.Done() {
		t.Errorf("consumed %d, dead %v", n, m.Dead())
	}
	if n := m.Feed([]byte(".")); n != 0 {
		t.Errorf("dead machine consumed %d", n)
	}
	// A BINSTRING of negative length is no pickle either.
	if m, n := run(t, Config{}, []byte{'T', 0, 0, 0, 0x80, '.'}, 0); n != 5 || !m.Dead() {
		t.Errorf("negative BINSTRING: consumed %d, dead %v", n, m.Dead())
	}
}

func TestTextOpcodes(t *testing.T) {
	// Protocol 0: GLOBAL, text INT, PUT/GET, STRING lines.
	p := []byte("(Vstorage\np0\nctorch\nDoubleStorage\np1\nV5\nVcpu\nI12\ntQS'x'\n(g0\ng1\nV6\ng2\nL3L\ntQ.")
	var st storages
	m, n := run(t, Config{Limits: Bounded, Persistent: st.load}, p, 0)
	if n != len(p) || !m.Done() || !slices.Equal(st.keys, []string{"5", "6"}) {
		t.Fatalf("consumed %d of %d, keys %q", n, len(p), st.keys)
	}
}

// Graph mode is strict where the graph would go wrong; bounded mode goes on.
func TestGraphStrict(t *testing.T) {
	for _, c := range []struct {
		name string
		p    []byte
	}{
		{"GET of an index never PUT", []byte{0x80, 2, 'h', 5, '.'}},
		{"SETITEMS with no dict", []byte{0x80, 2, '(', 'K', 1, 'K', 2, 'u', '.'}},
		{"APPEND with no list", []byte{0x80, 2, 'K', 1, 'a', '.'}},
	} {
		g, _ := run(t, Config{Graph: true}, c.p, 0)
		b, _ := run(t, Config{Limits: Bounded}, c.p, 0)
		if !g.Broken() || b.Broken() || !g.Done() || !b.Done() {
			t.Errorf("%s: graph broken %v, bounded broken %v", c.name, g.Broken(), b.Broken())
		}
	}
}

// A pickle cut short: Salvage finishes the open SETITEMS and APPENDS.
func TestSalvage(t *testing.T) {
	p := pk{0x80, 2, '}', 'q', 0, '('}.str("model").op('}', '(').str("w")
	p = p.storagePid("FloatStorage", "0", 1).str("list").op(']', '(').storagePid("FloatStorage", "1", 1)
	var st storages
	m, _ := run(t, Config{Graph: true, Persistent: st.load}, p, 0)
	if _, ok := m.Result(); ok || m.Broken() {
		t.Fatal("a result from a cut pickle")
	}
	root, ok := m.Salvage()
	if !ok || root.Kind != Dict {
		t.Fatalf("salvaged %+v", root)
	}
	model := entry(t, root, "model")
	if w := entry(t, model, "w"); w.Kind != Pers || w.Text != "0" {
		t.Errorf("model.w %+v", w)
	}
	if l := elems(entry(t, model, "list"), Elem); len(l) != 1 || l[0].Text != "1" {
		t.Errorf("model.list %+v", l)
	}
}

func TestLeSigned(t *testing.T) {
	for _, c := range []struct {
		b []byte
		v int64
	}{
		{nil, 0}, {[]byte{0xff}, -1}, {[]byte{0x80}, -128}, {[]byte{0xff, 0x00}, 255},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0x80}, -1 << 63}, {[]byte{1, 2, 3}, 0x030201},
	} {
		if v := leSigned(c.b); v != c.v {
			t.Errorf("%x: %d, want %d", c.b, v, c.v)
		}
	}
}

// sharedArgs is a pickle that calls f with one n-tuple, from the memo, n
// times: [f(*t), f(*t), ...].
func sharedArgs(n int) []byte {
	p := pk{0x80, 2, '('}
	for i := 0; i < n; i++ {
		p = p.op('K', 1)
	}
	p = p.op('t', 'q', 0, '0').global("m", "f").op('q', 1, '0', ']')
	for i := 0; i < n; i++ {
		p = p.op('h', 1, 'h', 0, 'R', 'a')
	}
	return p.op('.')
}

// TestGraphLinear: a tuple the memo hands to many calls is held once, so
// what a Graph machine allocates grows with the pickle, not its square.
func TestGraphLinear(t *testing.T) {
	alloc := func(n int) uint64 {
		p := sharedArgs(n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, _ := run(t, Config{Graph: true}, p, 0)
		runtime.ReadMemStats(&after)
		if v, ok := m.Result(); !ok || len(v.Items()) != n || len(v.Items()[n-1].Val.Args()) != n {
			t.Fatalf("n=%d: result %+v", n, v)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, big := alloc(1000), alloc(4000)
	if big > 8*small {
		t.Errorf("4x the pickle allocates %.1fx", float64(big)/float64(small))
	}
}

// Package pickle reads Python pickles (protocols 0 to 5) as a stream of
// bytes: the one pickle opcode machine of ckptfs, shared by the format
// detector (encode/detect: torch's storages, on every save) and the
// checkpoint analyzer (encode/analyze: the state dict's names of storages).
//
// A Machine frames every opcode exactly, so it finds STOP whatever the
// pickle holds, and runs the pickle's stack, marks and memo over a small
// value model (Value): scalars, globals, tuples and, in Graph mode, the
// lists, dicts and call results the pickle builds, with their contents.
// What a value means is the user's business, through three hooks: the
// persistent id (Config.Persistent), tuples as they are built
// (Config.OnTuple) and strings as they are pushed (Config.OnStr).
//
// It never panics, its work is linear in the input, and under Limits its
// memory is bounded whatever it reads (see Bounded).
package pickle

import "strings"

// Kind is what a Value holds.
type Kind uint8

const (
	// Other is any value the model does not keep: floats, bytes, sets,
	// strings over Limits.Str, longs over 8 bytes, and, outside Graph mode,
	// tuples over Limits.Tuple and tuples inside tuples.
	Other  Kind = iota
	None        // None
	Bool        // Num: 0 or 1
	Int         // Num
	Str         // Text: a str or a byte string (BINSTRING, SHORT_BINSTRING, STRING)
	Global      // Text: module + "\n" + name (GLOBAL, STACK_GLOBAL of two strings)
	Tuple       // Node: the elements (Role Elem)
	List        // Graph mode: Node, the elements
	Dict        // Graph mode: Node, the entries (Role Entry)
	Object      // a call's result (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ); Graph mode: Node, with its Call
	Pers        // what Config.Persistent returned for a persistent id
)

var kindNames = [...]string{"other", "None", "bool", "int", "str", "global", "tuple", "list", "dict", "object", "pers"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// Value is one value on the pickle's stack or in its memo. The zero Value
// is Other.
type Value struct {
	Kind Kind
	Num  int64  // Int; Bool: 0 or 1
	Text string // Str, Global; Pers: as the Persistent hook sets it
	// Node holds a tuple's elements, and in Graph mode a list's, dict's or
	// call result's contents. It is shared by every reference to the value
	// (DUP, the memo), so what SETITEMS adds later shows through all of them,
	// and it is the value's identity in a walk of the graph. A Persistent
	// hook may set it (to an empty Node) to give a persistent value identity.
	Node *Node
}

// Node is the contents of a container value.
type Node struct {
	Call  *Call  // an Object's: what built it, from what; nil for the other kinds
	Items []Item // in the order the pickle added them
}

// Call is how an Object was built: Func(*Args), Args being the argument
// tuple as the pickle built it (shared, not copied: a tuple the memo hands
// to many calls costs its size once). REDUCE, NEWOBJ and NEWOBJ_EX take the
// callable or class and the argument value from the stack (NEWOBJ_EX's
// keyword arguments are the object's first item, of Role KwArgs); OBJ and
// INST take the class and the arguments marked (Args is then a new Tuple).
type Call struct {
	Func Value
	Args Value
}

// Item is one part of a container's contents.
type Item struct {
	Role Role
	Key  *Value // Role Entry: the key; nil for the other roles
	Val  Value
}

// Role is what an Item is to its container.
type Role uint8

const (
	// Elem is an element of a tuple or list (TUPLE, LIST, APPEND, APPENDS),
	// or appended to an object. A list's or tuple's element's index is its
	// index in Items; an object's, that plus the number of its Call's
	// arguments.
	Elem Role = iota
	// Entry is a key and value of a dict (SETITEM, SETITEMS, DICT), or of an
	// object filled like one (an OrderedDict is REDUCEd, then filled).
	Entry
	// KwArgs is NEWOBJ_EX's keyword arguments.
	KwArgs
	// State is BUILD's state: what __setstate__ or the instance's __dict__
	// gets. (A tuple takes none: tuples are immutable, and BUILD on one is
	// ignored.)
	State
)

// Items returns the contents of v (nil for a scalar or an opaque value).
func (v Value) Items() []Item {
	if v.Node == nil {
		return nil
	}
	return v.Node.Items
}

// Global returns the module and name of a Global value.
func (v Value) Global() (module, name string, ok bool) {
	if v.Kind != Global {
		return "", "", false
	}
	module, name, _ = strings.Cut(v.Text, "\n")
	return module, name, true
}

// Args returns the arguments of an Object's Call: the elements of its
// argument tuple, or the argument itself were it not a tuple. It is nil for
// the other kinds, and outside Graph mode.
func (v Value) Args() []Value {
	if v.Kind != Object || v.Node == nil || v.Node.Call == nil {
		return nil
	}
	a := v.Node.Call.Args
	if a.Kind != Tuple {
		return []Value{a}
	}
	out := make([]Value, len(a.Items()))
	for i, it := range a.Items() {
		out[i] = it.Val
	}
	return out
}

// setItems adds key/value pairs to a dict, or to an object; on anything
// else it does nothing.
func setItems(t Value, kv []Value) {
	if t.Node == nil || t.Kind != Dict && t.Kind != Object {
		return
	}
	keys := make([]Value, len(kv)/2)
	for i := range keys {
		keys[i] = kv[2*i]
		t.Node.Items = append(t.Node.Items, Item{Role: Entry, Key: &keys[i], Val: kv[2*i+1]})
	}
}

// appendItems adds elements to a list, or to an object.
func appendItems(t Value, items []Value) {
	if t.Node == nil || t.Kind != List && t.Kind != Object {
		return
	}
	for _, v := range items {
		t.Node.Items = append(t.Node.Items, Item{Role: Elem, Val: v})
	}
}

// addItem adds one item of role r to a list, dict or object.
func addItem(t Value, r Role, v Value) {
	if t.Node != nil && (t.Kind == List || t.Kind == Dict || t.Kind == Object) {
		t.Node.Items = append(t.Node.Items, Item{Role: r, Val: v})
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

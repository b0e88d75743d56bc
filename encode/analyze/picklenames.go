package analyze

import (
	"strconv"
	"strings"

	"github.com/ckptfs/ckptfs/encode/pickle"
)

// pickleStorageNames walks a torch.save pickle (data.pkl) and names its
// storages: for each persistent id ('storage', type, key, location, numel)
// it returns the first dict-key path that reaches it, e.g. key "17" ->
// "model.layer1.weight" or "state.3.exp_avg".
//
// encode/pickle (Graph mode, any protocol 0..5) builds the object graph the
// opcodes describe (dicts, lists, tuples, calls, persistent ids; other
// values are opaque), which this walks depth first in insertion order, so
// "first" is the order the writer serialised the state dict in. On a pickle
// cut short or spoilt (an unknown opcode, a broken stack) it names what it
// has read (see pickle.Machine.Salvage). It never panics, and its work is
// about linear in len(p).
func pickleStorageNames(p []byte) map[string]string {
	m := pickle.New(pickle.Config{Graph: true, Persistent: persistent})
	m.Feed(p)
	root, ok := m.Result()
	if !ok {
		root, ok = m.Salvage()
	}
	names := map[string]string{}
	if ok {
		walkNames(root, names)
	}
	return names
}

// persistent is what torch's persistent_load returns for pid: a storage
// reference when pid is ('storage', type, key, ...), else an opaque value.
// Its Node gives it an identity in the walk.
func persistent(pid pickle.Value) pickle.Value {
	k := pid.Items()
	if pid.Kind != pickle.Tuple || len(k) < 3 || k[0].Val.Kind != pickle.Str || k[0].Val.Text != "storage" ||
		k[2].Val.Kind != pickle.Str {
		return pickle.Value{}
	}
	return pickle.Value{Kind: pickle.Pers, Text: k[2].Val.Text, Node: &pickle.Node{}}
}

// keyName is how a dict key reads in a path.
func keyName(k pickle.Value) string {
	switch k.Kind {
	case pickle.Str:
		if len(k.Text) > keyNameCap {
			return k.Text[:keyNameCap] + "…"
		}
		return k.Text
	case pickle.Int:
		return strconv.FormatInt(k.Num, 10)
	case pickle.Bool:
		if k.Num != 0 {
			return "True"
		}
		return "False"
	case pickle.None:
		return "None"
	}
	return "?"
}

// itemName is the path component an item adds: a dict key, an element's
// index; an object's state and keyword arguments add none.
func itemName(it pickle.Item, index int) string {
	switch it.Role {
	case pickle.Entry:
		return keyName(*it.Key)
	case pickle.Elem:
		return strconv.Itoa(index)
	}
	return ""
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

// walkNames records, for each storage root reaches, the first path that
// reaches it, depth first in insertion order. Each node is entered once, so
// shared and cyclic graphs cost their size.
func walkNames(root pickle.Value, names map[string]string) {
	type frame struct {
		v    pickle.Value
		path *pathSeg
	}
	seen := map[*pickle.Node]bool{}
	used := map[string]bool{} // paths given: one object may hold two storages
	todo := []frame{{v: root}}
	size := 0
	for len(todo) > 0 && size < namesBytes {
		f := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if f.v.Node == nil {
			continue // a scalar or an opaque value
		}
		if seen[f.v.Node] {
			continue
		}
		seen[f.v.Node] = true
		if f.v.Kind == pickle.Pers {
			key := f.v.Text
			if _, ok := names[key]; !ok && f.path != nil {
				p := f.path.String()
				if used[p] {
					p += "#" + key
				}
				used[p] = true
				names[key] = p
				size += len(key) + len(p)
			}
			continue
		}
		// An object's contents: its call's arguments, which add nothing to
		// a path (_rebuild_tensor_v2(storage, ...) under "fc.weight" names
		// its storage "fc.weight"), then what was added to it, its elements
		// numbered after the arguments. Pushed last first.
		var args []pickle.Item
		var argv pickle.Value
		nargs := 0
		if c := f.v.Node.Call; c != nil {
			argv, nargs = c.Args, 1
			if argv.Kind == pickle.Tuple {
				args, nargs = argv.Items(), len(argv.Items())
			}
		}
		items := f.v.Node.Items
		for i := len(items) - 1; i >= 0; i-- {
			p := f.path
			if name := itemName(items[i], nargs+i); name != "" {
				if p != nil && p.depth >= pathDepthCap {
					continue // no real state dict nests this deep
				}
				p = &pathSeg{name: name, parent: p}
				if p.parent != nil {
					p.depth = p.parent.depth + 1
				}
			}
			todo = append(todo, frame{v: items[i].Val, path: p})
		}
		switch {
		case f.v.Node.Call == nil:
		case argv.Kind != pickle.Tuple:
			todo = append(todo, frame{v: argv, path: f.path})
		case !seen[argv.Node]:
			seen[argv.Node] = true // a tuple many calls share is walked once
			for i := len(args) - 1; i >= 0; i-- {
				todo = append(todo, frame{v: args[i].Val, path: f.path})
			}
		}
	}
}

// StorageNames names the storages of a torch.save pickle (a zip's
// data.pkl) by their first dict-key path ("state.3.exp_avg"), keyed as the
// detector keys their spans ("data/<key>"): what an archive tier needs to
// tell a tensor's role.
func StorageNames(pkl []byte) map[string]string {
	names := map[string]string{}
	for key, name := range pickleStorageNames(pkl) {
		names["data/"+key] = name
	}
	return names
}

package detect

import "github.com/ckptfs/ckptfs/encode/pickle"

// pickleReader reads one pickle (encode/pickle, with bounded memory) for
// torch's persistent ids: ('storage', torch.<Type>Storage, key, location,
// numel[, view]). It records each storage of a known type, in order of
// first appearance, and gives an untyped storage the dtype that sits beside
// it in the same tuple. For the legacy format's list of keys it can also
// collect the strings pushed, in order.
type pickleReader struct {
	m    *pickle.Machine
	done bool // STOP was read

	storages map[string]*storageInfo
	order    []string // storage keys in order of first appearance
	storSz   int      // bytes of keys in storages
	strs     []string // strings pushed, in order, when collectStrs is set
	strsSz   int

	collectStrs bool
}

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
	pickleStrsBytes = 4 << 20 // bytes of collected strings
	pickleStrsCap   = 1 << 18 // count of collected strings
	pickleStorCap   = 1 << 16 // storages recorded
	pickleStorBytes = 4 << 20 // bytes of recorded storage keys
)

func newPickleReader() *pickleReader {
	r := &pickleReader{storages: map[string]*storageInfo{}}
	r.m = pickle.New(pickle.Config{
		Limits:     pickle.Bounded,
		Persistent: r.persistent,
		OnTuple:    r.refineUntyped,
		OnStr:      r.collect,
	})
	return r
}

// feed reads p and returns how many bytes belong to the pickle: len(p) until
// STOP, then the bytes up to and including STOP. After STOP (or once the
// reader is dead) it reads nothing more.
func (r *pickleReader) feed(p []byte) int {
	n := r.m.Feed(p)
	r.done = r.m.Done()
	return n
}

// dead reports whether the bytes are not a pickle.
func (r *pickleReader) dead() bool { return r.m.Dead() }

func (r *pickleReader) collect(s string) {
	if r.collectStrs && r.strsSz+len(s) <= pickleStrsBytes && len(r.strs) < pickleStrsCap {
		r.strs = append(r.strs, s)
		r.strsSz += len(s)
	}
}

// persistent interprets a persistent id and returns the value persistent_load
// would push: a reference to the storage.
func (r *pickleReader) persistent(pid pickle.Value) pickle.Value {
	t := pid.Items()
	if pid.Kind != pickle.Tuple || len(t) < 5 || t[0].Val.Kind != pickle.Str || t[0].Val.Text != "storage" ||
		t[1].Val.Kind != pickle.Global || t[2].Val.Kind != pickle.Str || t[4].Val.Kind != pickle.Int {
		return pickle.Value{}
	}
	key := t[2].Val.Text
	if _, seen := r.storages[key]; !seen && len(r.storages) < pickleStorCap && r.storSz+len(key) <= pickleStorBytes {
		mod, name, _ := t[1].Val.Global()
		if et, ok := storageTypes[name]; ok && mod == "torch" {
			r.storages[key] = &storageInfo{
				elem: et, numel: t[4].Val.Num, ordinal: len(r.order),
				untyped: name == "UntypedStorage",
			}
			r.order = append(r.order, key)
			r.storSz += len(key)
		}
	}
	return pickle.Value{Kind: pickle.Pers, Text: key}
}

// refineUntyped gives an untyped storage the dtype that sits beside it in the
// same tuple (torch._utils._rebuild_tensor_v3(storage, ..., dtype, ...) in
// newer torch). Its byte length stays numel (= nbytes) * 1.
func (r *pickleReader) refineUntyped(t pickle.Value) {
	var st *storageInfo
	var dt elemType
	found := false
	for _, it := range t.Items() {
		switch x := it.Val; x.Kind {
		case pickle.Pers:
			if s := r.storages[x.Text]; s != nil && s.untyped {
				st = s
			}
		case pickle.Global:
			mod, name, _ := x.Global()
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

package analyze

import (
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// pk builds protocol-2 pickles the way torch.save writes them.
type pk []byte

func (p pk) op(b ...byte) pk { return append(p, b...) }

func (p pk) str(s string) pk {
	p = append(p, 'X')
	p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
	return append(p, s...)
}

func (p pk) global(mod, name string) pk {
	return append(append(p, 'c'), mod+"\n"+name+"\n"...)
}

// tensor pushes torch._utils._rebuild_tensor_v2(persistent_load(('storage',
// torch.FloatStorage, key, 'cpu', numel)), 0, (numel,), (1,), False, OrderedDict()).
func (p pk) tensor(key string, numel byte) pk {
	p = p.global("torch._utils", "_rebuild_tensor_v2").op('(', '(').str("storage").global("torch", "FloatStorage").
		str(key).str("cpu").op('K', numel, 't', 'Q', 'K', 0, 'K', numel, 0x85, 'K', 1, 0x85, 0x89)
	return p.global("collections", "OrderedDict").op(')', 'R', 't', 'R')
}

// torchLikePickle is {"model": OrderedDict(fc.weight, fc.bias), "optimizer":
// {"state": {3: {"exp_avg": t, "pair": (t, t)}}, "param_groups": [{"params": [3]}]},
// "tied": <fc.weight again, by memo>, "buffers": [t]}.
func torchLikePickle() []byte {
	p := pk{0x80, 2, '}', 'q', 0, '('}
	p = p.str("model").global("collections", "OrderedDict").op(')', 'R', '(')
	p = p.str("fc.weight").tensor("0", 6).op('q', 1)
	p = p.str("fc.bias").tensor("1", 2).op('u')
	p = p.str("optimizer").op('}', '(').str("state").op('}', '(', 'K', 3, '}', '(')
	p = p.str("exp_avg").tensor("2", 6)
	p = p.str("pair").tensor("3", 1).tensor("4", 1).op(0x86, 'u', 'u')
	p = p.str("param_groups").op(']', '(', '}', '(').str("params").op(']', 'K', 3, 'a', 'u', 'e', 'u')
	p = p.str("tied").op('h', 1)
	p = p.str("buffers").op(']').tensor("5", 1).op('a')
	return p.op('u', '.')
}

func TestPickleStorageNames(t *testing.T) {
	want := map[string]string{
		"0": "model.fc.weight",
		"1": "model.fc.bias",
		"2": "optimizer.state.3.exp_avg",
		"3": "optimizer.state.3.pair.0",
		"4": "optimizer.state.3.pair.1",
		"5": "buffers.0",
	}
	p := torchLikePickle()
	if got := pickleStorageNames(p); !maps.Equal(got, want) {
		t.Fatalf("names %v\nwant %v", got, want)
	}
	// Cut short or spoilt, it names what it read, with full paths.
	cut := p[:len(p)-len("u.")]
	if got := pickleStorageNames(cut); !maps.Equal(got, want) {
		t.Fatalf("truncated before the last SETITEMS: names %v\nwant %v", got, want)
	}
	spoilt := append(append([]byte{}, p[:len(p)-len("a")-len("u.")]...), 0xff, 'a', 'u', '.')
	got := pickleStorageNames(spoilt)
	delete(want, "5") // read, but not yet appended to "buffers"
	if !maps.Equal(got, want) {
		t.Fatalf("unknown opcode before the last APPEND: names %v\nwant %v", got, want)
	}
}

func TestPickleStorageNamesSharedObject(t *testing.T) {
	// One object holding two storages: the second is told apart by its key.
	p := pk{0x80, 2, '}', '('}.str("w").global("torch._utils", "_rebuild_wrapper").op('(')
	p = p.op('(').str("storage").global("torch", "FloatStorage").str("7").str("cpu").op('K', 1, 't', 'Q')
	p = p.op('(').str("storage").global("torch", "FloatStorage").str("8").str("cpu").op('K', 1, 't', 'Q')
	p = p.op('t', 'R', 'u', '.')
	want := map[string]string{"7": "w", "8": "w#8"}
	if got := pickleStorageNames(p); !maps.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
}

func FuzzPickleStorageNames(f *testing.F) {
	f.Add(torchLikePickle())
	f.Add([]byte{0x80, 2, '}', '.'})
	f.Add([]byte{'(', 'h', 0, 'u', '.'})
	if p, err := os.ReadFile(filepath.Join(writersDir, "torch/ckpt_0010.pt")); err == nil {
		f.Add(p) // a zip, not a pickle: it must give up at once
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for k, v := range pickleStorageNames(p) {
			if v == "" {
				t.Fatalf("storage %q named by an empty path", k)
			}
		}
	})
}

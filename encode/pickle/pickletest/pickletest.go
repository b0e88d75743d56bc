// Package pickletest makes large pickles for the benchmarks of the pickle
// machine's users (encode/detect, encode/analyze).
package pickletest

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// StateDict is a data.pkl as torch.save writes it (protocol 2, memoised
// with BINPUT/LONG_BINPUT, SETITEMS batched by 1000) of
// {"state_dict": OrderedDict(layers.<i>.weight: float32 tensor of 16384)}.
func StateDict(n int) []byte {
	p := []byte{0x80, 2}
	memo := 0
	put := func() int {
		if memo < 256 {
			p = append(p, 'q', byte(memo))
		} else {
			p = binary.LittleEndian.AppendUint32(append(p, 'r'), uint32(memo))
		}
		memo++
		return memo - 1
	}
	get := func(i int) {
		if i < 256 {
			p = append(p, 'h', byte(i))
		} else {
			p = binary.LittleEndian.AppendUint32(append(p, 'j'), uint32(i))
		}
	}
	str := func(s string) int {
		p = binary.LittleEndian.AppendUint32(append(p, 'X'), uint32(len(s)))
		p = append(p, s...)
		return put()
	}
	global := func(mod, name string) int {
		p = append(p, "c"+mod+"\n"+name+"\n"...)
		return put()
	}
	p = append(p, '}')
	put()
	p = append(p, '(')
	str("state_dict")
	od := global("collections", "OrderedDict")
	p = append(p, ')', 'R')
	put()
	p = append(p, '(')
	var rebuild, storage, float, cpu int
	for i := 0; i < n; i++ {
		str(fmt.Sprintf("layers.%d.weight", i))
		if i == 0 {
			rebuild = global("torch._utils", "_rebuild_tensor_v2")
		} else {
			get(rebuild)
		}
		p = append(p, '(', '(')
		if i == 0 {
			storage = str("storage")
			float = global("torch", "FloatStorage")
		} else {
			get(storage)
			get(float)
		}
		str(strconv.Itoa(i))
		if i == 0 {
			cpu = str("cpu")
		} else {
			get(cpu)
		}
		p = append(p, 'M', 0, 0x40, 't')
		put()
		p = append(p, 'Q', 'K', 0, 'M', 0, 1, 'K', 64, 0x86)
		put()
		p = append(p, 'K', 64, 'K', 1, 0x86)
		put()
		p = append(p, 0x89)
		get(od)
		p = append(p, ')', 'R')
		put()
		p = append(p, 't')
		put()
		p = append(p, 'R')
		put()
		if (i+1)%1000 == 0 && i+1 < n {
			p = append(p, 'u', '(')
		}
	}
	return append(p, 'u', 'u', '.')
}

package analyze

import (
	"testing"

	"github.com/ckptfs/ckptfs/encode/pickle/pickletest"
)

// BenchmarkPickleStorageNames names the storages of a large data.pkl
// (50,000 tensors, ~8 MB).
func BenchmarkPickleStorageNames(b *testing.B) {
	const n = 50000
	p := pickletest.StateDict(n)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		names := pickleStorageNames(p)
		if len(names) != n || names["7"] != "state_dict.layers.7.weight" {
			b.Fatalf("%d names, 7: %q", len(names), names["7"])
		}
	}
}

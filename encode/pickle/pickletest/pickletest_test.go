package pickletest

import (
	"testing"

	"github.com/ckptfs/ckptfs/encode/pickle"
)

// TestStateDictIsAPickle: the machine reads it whole to STOP, and it holds
// one persistent id (a storage) per tensor.
func TestStateDictIsAPickle(t *testing.T) {
	const n = 2500 // past the batches of 1000 and the 256 one-byte memo slots
	p := StateDict(n)
	var storages int
	m := pickle.New(pickle.Config{Persistent: func(pid pickle.Value) pickle.Value {
		storages++
		return pickle.Value{}
	}})
	if got := m.Feed(p); got != len(p) || !m.Done() || m.Dead() {
		t.Fatalf("read %d of %d bytes, done %v, dead %v", got, len(p), m.Done(), m.Dead())
	}
	if storages != n {
		t.Errorf("%d persistent ids, want %d", storages, n)
	}
}

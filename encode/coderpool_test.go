package encode

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"runtime"
	"testing"
)

// TestIdleCodersSurviveCollections: a Coder that Encode and Decode used is
// there for the next call even after garbage collections, with its scratch
// (a sync.Pool alone drops it at the second collection, and the next
// call grows a new Coder's scratch again: about 1 MiB per chunk).
func TestIdleCodersSurviveCollections(t *testing.T) {
	for len(keptIdle) > 0 {
		<-keptIdle
	}
	const n = 64 << 10 // a chunk of float32
	plain, ref := make([]byte, 4*n), make([]byte, 4*n)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < n; i++ {
		v := float32(r.NormFloat64())
		binary.LittleEndian.PutUint32(ref[4*i:], math.Float32bits(v))
		binary.LittleEndian.PutUint32(plain[4*i:], math.Float32bits(v+float32(r.NormFloat64())*1e-4))
	}
	enc := make([]byte, 0, len(plain)+4096)
	dec := make([]byte, 0, len(plain))
	roundTrip := func() {
		var err error
		if enc, err = Encode(enc[:0], Planes, Float32, plain, ref); err != nil {
			t.Fatal(err)
		}
		if dec, err = Decode(dec[:0], enc, ref); err != nil || !bytes.Equal(dec, plain) {
			t.Fatalf("round trip: %v", err)
		}
	}
	roundTrip() // grows one Coder's scratch
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	roundTrip()
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 128<<10 {
		t.Errorf("a round trip after two collections allocated %d KiB: the idle Coder's scratch was dropped", grew>>10)
	}
}

// TestHugeChunkCodersNotKept: a Coder whose scratch grew for a chunk above
// keptPlainMax is not kept across collections.
func TestHugeChunkCodersNotKept(t *testing.T) {
	for len(keptIdle) > 0 {
		<-keptIdle
	}
	plain := make([]byte, 2*keptPlainMax)
	rand.New(rand.NewSource(2)).Read(plain[:1024])
	if _, err := Encode(nil, Planes, Float32, plain, nil); err != nil {
		t.Fatal(err)
	}
	if len(keptIdle) != 0 {
		t.Errorf("a Coder used for a %d MiB chunk was kept", len(plain)>>20)
	}
}

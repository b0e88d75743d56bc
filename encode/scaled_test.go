package encode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// decayPair is Adam's exp_avg_sq between two saves: the reference decayed
// by f, a few elements renewed, with the values scaling must leave alone
// (NaN, ±Inf, zeros, denormals, negatives) and an odd tail.
func decayPair(seed uint64, n int, f float32) (plain, ref []byte) {
	rng := rand.New(rand.NewPCG(seed, 19))
	plain, ref = make([]byte, 4*n+3), make([]byte, 4*n+3)
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-45, -2.5, math.MaxFloat32}
	for i := range n {
		r := float32(math.Exp(rng.NormFloat64()*3 - 12))
		p := r * f
		switch {
		case i%97 == 0:
			r, p = specials[i/97%len(specials)], specials[(i/97+1)%len(specials)]
		case i%5 == 0:
			p += float32(rng.ExpFloat64()) * r * 0.1
		}
		binary.LittleEndian.PutUint32(ref[4*i:], math.Float32bits(r))
		binary.LittleEndian.PutUint32(plain[4*i:], math.Float32bits(p))
	}
	copy(plain[4*n:], "abc")
	copy(ref[4*n:], "abd")
	return plain, ref
}

// toBF16 keeps the top half of each float32 of decayPair (the tail as is).
func toBF16(b []byte) []byte {
	n := len(b) / 4
	out := make([]byte, 2*n, 2*n+len(b)%4)
	for i := range n {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(binary.LittleEndian.Uint32(b[4*i:])>>16))
	}
	return append(out, b[4*n:]...)
}

func TestScaledBFloat16(t *testing.T) {
	p32, r32 := decayPair(4, 20000, 0.88)
	plain, ref := toBF16(p32), toBF16(r32)
	cd := NewCoder()
	enc, err := cd.Encode(nil, Scaled, BFloat16, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	if enc[headerLen] != predScale {
		t.Fatalf("predictor %d, want the scaled reference", enc[headerLen])
	}
	out, err := cd.Decode(nil, enc, ref)
	if err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("round trip: %v", err)
	}
	// Rounding to bfloat16 is to nearest, ties to even, and overflows to Inf.
	var b [2]byte
	for _, c := range []struct{ in, want uint32 }{
		{0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x7f7fffff, 0x7f80}, {0xbf80ffff, 0xbf81},
	} {
		put(BFloat16, b[:], 0, c.in)
		if got := binary.LittleEndian.Uint16(b[:]); uint32(got) != c.want {
			t.Errorf("bf16(%08x) = %04x, want %04x", c.in, got, c.want)
		}
	}
}

func TestScaledRoundTrip(t *testing.T) {
	plain, ref := decayPair(1, 20000, 0.8800)
	cd := NewCoder()
	enc, err := cd.Encode(nil, Scaled, Float32, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	if enc[headerLen] != predScale {
		t.Fatalf("predictor %d, want the scaled reference", enc[headerLen])
	}
	pl, err := cd.Encode(nil, Planes, Float32, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) >= len(pl) {
		t.Errorf("scaled %d bytes, planes %d: the decay was not used", len(enc), len(pl))
	}
	out, err := cd.Decode(nil, enc, ref)
	if err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("round trip: %v", err)
	}
	// Other dtypes, baselines and chunks that do not decay are planes
	// behind a predNone byte.
	for _, c := range []struct {
		dt   DType
		ref  []byte
		p    []byte
		name string
	}{{Float64, ref, plain, "float64"}, {Float32, nil, plain, "baseline"}, {Float32, ref, ref, "unchanged"}} {
		enc, err := cd.Encode(nil, Scaled, c.dt, c.p, c.ref)
		if err != nil {
			t.Fatal(err)
		}
		if enc[headerLen] != predNone {
			t.Errorf("%s: predictor %d, want none", c.name, enc[headerLen])
		}
		out, err := cd.Decode(nil, enc, c.ref)
		if err != nil || !bytes.Equal(out, c.p) {
			t.Fatalf("%s: round trip: %v", c.name, err)
		}
	}
}

// TestScaledRebaseline: when planes codes a scaled chunk as a baseline
// (its delta does not pay), the chunk must come out as a plain baseline
// record, which decodes without the reference.
func TestScaledRebaseline(t *testing.T) {
	plain, ref := decayPair(5, 20000, 0.88)
	cd := NewCoder()
	cd.pl.forceChoice = &planeChoice{mode: modeBase, grp: grouping{k: 1}}
	enc, err := cd.Encode(nil, Scaled, Float32, plain, ref)
	cd.pl.forceChoice = nil
	if err != nil {
		t.Fatal(err)
	}
	h, err := Inspect(enc)
	if err != nil || h.Delta || enc[headerLen] != predNone {
		t.Fatalf("delta %t, predictor %d (%v), want a baseline record", h.Delta, enc[headerLen], err)
	}
	out, err := Decode(nil, enc, nil)
	if err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("round trip: %v", err)
	}
}

// TestScaledCorrupt: records a decoder must refuse without panicking.
func TestScaledCorrupt(t *testing.T) {
	plain, ref := decayPair(2, 4000, 0.9)
	enc, err := Encode(nil, Scaled, Float32, plain, ref)
	if err != nil || enc[headerLen] != predScale {
		t.Fatalf("setup: %v", err)
	}
	for name, mutate := range map[string]func([]byte){
		"factor 1":    func(b []byte) { binary.LittleEndian.PutUint32(b[headerLen+1:], math.Float32bits(1)) },
		"factor 0":    func(b []byte) { binary.LittleEndian.PutUint32(b[headerLen+1:], 0) },
		"factor -0.9": func(b []byte) { binary.LittleEndian.PutUint32(b[headerLen+1:], math.Float32bits(-0.9)) },
		"factor NaN":  func(b []byte) { binary.LittleEndian.PutUint32(b[headerLen+1:], 0x7fc00000) },
		"factor Inf":  func(b []byte) { binary.LittleEndian.PutUint32(b[headerLen+1:], 0x7f800000) },
		"predictor 2": func(b []byte) { b[headerLen] = 2 },
		"float64":     func(b []byte) { b[3] = b[3]&^0x0f | byte(Float64) },
	} {
		b := append([]byte(nil), enc...)
		mutate(b)
		if _, err := Decode(nil, b, ref); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) {
			t.Errorf("%s: %v, want a corrupt chunk", name, err)
		}
	}
	// A scaled record needs its reference even if the header says baseline.
	b := append([]byte(nil), enc...)
	b[3] &^= 0x10
	if _, err := Decode(nil, b, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("scaled record in a baseline chunk: %v", err)
	}
	// A slightly different factor decodes to other bytes: the CRC says so.
	b = append([]byte(nil), enc...)
	b[headerLen+1] ^= 1
	if _, err := Decode(nil, b, ref); !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrCorrupt) {
		t.Errorf("factor off by an ulp: %v", err)
	}
}

// FuzzScaled: float32 pairs where plain is the reference scaled by a
// factor the fuzzer picks, perturbed, must round-trip through Scaled; any
// mutation of the chunk must decode exactly or fail with a sentinel.
func FuzzScaled(f *testing.F) {
	plain, ref := decayPair(3, 300, 0.88)
	f.Add(ref, float32(0.88), uint16(7), uint8(0), uint8(0))
	f.Add(plain, float32(1.5), uint16(0), uint8(5), uint8(0xff))
	f.Add([]byte{}, float32(2), uint16(1), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, refBytes []byte, factor float32, every uint16, at, flip uint8) {
		if len(refBytes) > 1<<16 {
			return
		}
		dt := Float32
		if flip&0x80 != 0 {
			dt = BFloat16
		}
		ref := refBytes
		plain := make([]byte, len(ref))
		copy(plain, ref)
		for i := 0; i < len(ref)/dt.Width(); i++ {
			v := scaleElem(elem(dt, ref, i), factor)
			if every != 0 && i%int(every) == 0 {
				v ^= uint32(flip) << 16
			}
			put(dt, plain, i, v)
		}
		cd := NewCoder()
		enc, err := cd.Encode(nil, Scaled, dt, plain, ref)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cd.Decode(nil, enc, ref)
		if err != nil || !bytes.Equal(out, plain) {
			t.Fatalf("round trip: %v", err)
		}
		if len(enc) <= headerLen {
			return
		}
		enc[headerLen+int(at)%(len(enc)-headerLen)] ^= flip | 1
		if _, err := cd.Decode(nil, enc, ref); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) &&
			!errors.Is(err, ErrRefMismatch) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("decode error wraps no sentinel: %v", err)
		}
	})
}

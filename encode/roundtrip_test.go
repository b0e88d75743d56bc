package encode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

var allDTypes = []DType{Bytes, Float32, Float16, BFloat16, Float64}

// roundTrip encodes and decodes one chunk and fails the test on any
// difference; it returns the encoded chunk.
func roundTrip(t *testing.T, cd *Coder, c Codec, dt DType, plain, ref []byte) []byte {
	t.Helper()
	enc, err := cd.Encode([]byte("prefix"), c, dt, plain, ref)
	if err != nil {
		t.Fatalf("%s/%s encode %d bytes: %v", c, dt, len(plain), err)
	}
	if string(enc[:6]) != "prefix" {
		t.Fatalf("%s/%s: Encode clobbered dst", c, dt)
	}
	enc = enc[6:]
	h, err := Inspect(enc)
	if err != nil {
		t.Fatalf("%s/%s inspect: %v", c, dt, err)
	}
	if h.Codec != c || h.DType != dt || h.PlainLen != len(plain) || h.EncodedLen != len(enc) {
		t.Fatalf("%s/%s header %+v, plain %d enc %d", c, dt, h, len(plain), len(enc))
	}
	if h.Delta && ref == nil {
		t.Fatalf("%s/%s: baseline encode produced a delta chunk", c, dt)
	}
	useRef := ref
	if !h.Delta {
		useRef = nil // a baseline must decode without its reference
	}
	got, err := cd.Decode([]byte("x"), enc, useRef)
	if err != nil {
		t.Fatalf("%s/%s decode %d bytes (delta %t): %v", c, dt, len(plain), h.Delta, err)
	}
	if got[0] != 'x' || !bytes.Equal(got[1:], plain) {
		t.Fatalf("%s/%s: round trip of %d bytes differs", c, dt, len(plain))
	}
	return enc
}

func floats32(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestRoundTripEdgeCases(t *testing.T) {
	cd := NewCoder()
	rng := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, 1, -1}
	walk := make([]float32, 5000)
	walk2 := make([]float32, 5000)
	for i := range walk {
		walk[i] = float32(rng.NormFloat64() * 0.05)
		walk2[i] = walk[i] + float32(rng.NormFloat64()*1e-4)
	}
	mixed := append([]float32(nil), walk2...)
	for i := 0; i < len(mixed); i += 7 {
		mixed[i] = special[i%len(special)]
	}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	cases := []struct {
		name       string
		plain, ref []byte
	}{
		{"empty", nil, nil},
		{"empty-delta", []byte{}, []byte{}},
		{"one-byte", []byte{7}, nil},
		{"one-byte-delta", []byte{7}, []byte{9}},
		{"odd", randBytes(4099), randBytes(4099)},
		{"specials", floats32(special), floats32(walk[:len(special)])},
		{"walk", floats32(walk2), floats32(walk)},
		{"walk-specials", floats32(mixed), floats32(walk)},
		{"same", floats32(walk), floats32(walk)},
		{"zeros", make([]byte, 1<<17+3), make([]byte, 1<<17+3)},
		{"zeros-vs-random", make([]byte, 70001), randBytes(70001)},
		{"const", bytes.Repeat([]byte{1, 2, 3, 4}, 40000), nil},
		{"random", randBytes(200003), randBytes(200003)},
	}
	for _, tc := range cases {
		for _, c := range Codecs() {
			for _, dt := range allDTypes {
				roundTrip(t, cd, c, dt, tc.plain, nil)
				if tc.ref != nil {
					roundTrip(t, cd, c, dt, tc.plain, tc.ref)
				}
			}
		}
	}
}

func TestRefMismatch(t *testing.T) {
	plain := floats32([]float32{1, 2, 3, 4})
	ref := floats32([]float32{1, 2, 3, 5})
	for _, c := range Codecs() {
		if _, err := Encode(nil, c, Float32, plain, ref[:15]); !errors.Is(err, ErrRefMismatch) {
			t.Errorf("%s: encode with short ref: %v, want ErrRefMismatch", c, err)
		}
		enc, err := Encode(nil, c, Float32, plain, ref)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := Inspect(enc)
		if !h.Delta {
			continue
		}
		if _, err := Decode(nil, enc, nil); !errors.Is(err, ErrRefMismatch) {
			t.Errorf("%s: decode delta without ref: %v, want ErrRefMismatch", c, err)
		}
		if _, err := Decode(nil, enc, ref[:12]); !errors.Is(err, ErrRefMismatch) {
			t.Errorf("%s: decode delta with short ref: %v, want ErrRefMismatch", c, err)
		}
		wrong := floats32([]float32{9, 2, 3, 5})
		if _, err := Decode(nil, enc, wrong); !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode with the wrong ref: %v, want ErrChecksum", c, err)
		}
	}
}

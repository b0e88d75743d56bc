package encode

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// genPair makes a (plain, ref) pair of n elements of dt in one of several
// shapes seen in checkpoints or likely to break a codec.
func genPair(rng *rand.Rand, dt DType, n int, kind string) (plain, ref []byte) {
	w := dt.Width()
	plain, ref = make([]byte, n*w+rng.IntN(w)), nil
	ref = make([]byte, len(plain))
	put := func(b []byte, i int, f float64) {
		switch dt {
		case Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
		case Float64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
		case BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(f))>>16))
		case Float16:
			binary.LittleEndian.PutUint16(b[2*i:], f16bits(f))
		default:
			b[i] = byte(int(f*64) & 0xFF)
		}
	}
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 5e-324, -5e-324, 1e-40, math.MaxFloat64}
	for i := 0; i < n; i++ {
		var p, r float64
		switch kind {
		case "random-bits":
			for k := range w {
				plain[i*w+k], ref[i*w+k] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			continue
		case "walk":
			r = rng.NormFloat64() * 0.05
			p = r + rng.NormFloat64()*1e-4
		case "walk-signflip":
			r = rng.NormFloat64() * 1e-3
			p = r + rng.NormFloat64()*1e-3
		case "specials":
			r = specials[rng.IntN(len(specials))]
			p = specials[rng.IntN(len(specials))]
			if rng.IntN(2) == 0 {
				p = rng.NormFloat64()
			}
		case "all-equal":
			p, r = 0.125, 0.125
		case "all-zero":
			p, r = 0, 0
		case "half-same":
			r = rng.NormFloat64()
			p = r
			if rng.IntN(2) == 0 {
				p = r * 1.001
			}
		}
		put(plain, i, p)
		put(ref, i, r)
	}
	for k := n * w; k < len(plain); k++ {
		plain[k], ref[k] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	return plain, ref
}

// f16bits rounds toward zero to IEEE half precision (good enough to make
// realistic fp16 bit patterns; exactness is not the point here).
func f16bits(f float64) uint16 {
	b := math.Float32bits(float32(f))
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xFF) - 127 + 15
	mant := uint16(b>>13) & 0x3FF
	switch {
	case b&0x7FFFFFFF > 0x7F800000:
		return sign | 0x7E00
	case exp >= 31:
		return sign | 0x7C00
	case exp <= 0:
		return sign
	}
	return sign | uint16(exp)<<10 | mant
}

var pairKinds = []string{"random-bits", "walk", "walk-signflip", "specials", "all-equal", "all-zero", "half-same"}

func TestRoundTripProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cd := NewCoder()
	for _, kind := range pairKinds {
		for _, dt := range allDTypes {
			for _, n := range []int{1, 7, 100, 4097, 70000} {
				plain, ref := genPair(rng, dt, n, kind)
				for _, c := range Codecs() {
					roundTrip(t, cd, c, dt, plain, nil)
					roundTrip(t, cd, c, dt, plain, ref)
				}
			}
		}
	}
}

// A random walk must code smaller as a delta than as a baseline, for the
// float delta codecs: otherwise the delta path is broken, not just weak.
// (zstd and gzip find no byte patterns in the XOR of noisy floats, so they
// are not held to it.)
func TestDeltaPays(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, dt := range []DType{Float32, BFloat16, Float64} {
		plain, ref := genPair(rng, dt, 65536, "walk")
		for _, c := range []Codec{Planes, DynRLE, RLE4, RLE4Gzip} {
			base, _ := Encode(nil, c, dt, plain, nil)
			delta, _ := Encode(nil, c, dt, plain, ref)
			if len(delta) >= len(base) {
				t.Errorf("%s/%s: delta %d bytes, baseline %d", c, dt, len(delta), len(base))
			}
		}
	}
}

// Damaged chunks (every truncation of a small chunk, byte flips all over a
// larger one) must give an error, never a panic or a wrong result.
func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	cd := NewCoder()
	for _, dt := range allDTypes {
		for _, c := range Codecs() {
			for _, kind := range []string{"walk", "specials", "half-same"} {
				plain, ref := genPair(rng, dt, 3000, kind)
				for _, r := range [][]byte{nil, ref} {
					enc, err := cd.Encode(nil, c, dt, plain, r)
					if err != nil {
						t.Fatal(err)
					}
					check := func(what string, bad []byte) {
						out, err := cd.Decode(nil, bad, r)
						if err == nil && string(out) != string(plain) {
							t.Fatalf("%s/%s %s: decoded wrong bytes without error", c, dt, what)
						}
						// A damaged length in a delta's header is a
						// reference of the wrong length: ErrRefMismatch.
						if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) &&
							!errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrRefMismatch) {
							t.Fatalf("%s/%s %s: error wraps no sentinel: %v", c, dt, what, err)
						}
					}
					for cut := 0; cut < len(enc); cut += 1 + len(enc)/97 {
						check("truncated", enc[:cut])
					}
					for k := 0; k < 64; k++ {
						bad := append([]byte(nil), enc...)
						bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
						check("flipped", bad)
					}
					check("trailing byte", append(append([]byte(nil), enc...), 0))
				}
			}
		}
	}
}

// Long chunks: 16 MiB and an odd length, every codec, baseline and delta.
func TestLargeChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: codes 16 MiB chunks with every codec (slow); run without -short")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	cd := NewCoder()
	for _, n := range []int{4 << 20, 1<<20 + 5} {
		plain, ref := genPair(rng, Float32, n, "walk")
		for _, c := range Codecs() {
			roundTrip(t, cd, c, Float32, plain, ref)
			if c != Gzip && c != RLE4Gzip {
				roundTrip(t, cd, c, Float32, plain, nil)
			}
		}
	}
}

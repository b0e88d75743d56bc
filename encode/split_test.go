package encode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestSplit16HighChain codes chains of float32 chunks with split16 and
// rebuilds each level's high form from the high planes alone: widened, it
// must equal the exact bytes with the low 16 bits of every element zeroed,
// at every depth, for every kind of data (signs flipping, specials, ties).
func TestSplit16HighChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 16))
	for _, kind := range pairKinds {
		for _, n := range []int{1, 7, 100, 4097, 70000} {
			// A chain: each level is a pair drawn against the one before.
			levels := make([][]byte, 4)
			levels[0], _ = genPair(rng, Float32, n, kind)
			for d := 1; d < len(levels); d++ {
				drawn, _ := genPair(rng, Float32, n, kind)
				next := bytes.Clone(levels[0])
				copy(next, drawn)
				// Half of the elements move a little from the level below.
				for i := 0; i+4 <= len(next); i += 4 {
					if rng.IntN(2) == 0 {
						copy(next[i:i+4], levels[d-1][i:i+4])
						next[i] ^= byte(rng.IntN(256))
					}
				}
				levels[d] = next
			}
			var refHigh, refForm []byte
			for d, plain := range levels {
				var ref []byte
				if d > 0 {
					ref = levels[d-1]
				}
				enc, err := Encode(nil, Split16, Float32, plain, ref)
				if err != nil {
					t.Fatal(err)
				}
				if out, err := Decode(nil, enc, ref); err != nil || !bytes.Equal(out, plain) {
					t.Fatalf("%s n=%d depth %d: exact decode: %v", kind, n, d, err)
				}
				if len(plain) < 4 {
					if HighViewable(enc) {
						t.Fatalf("%s: a chunk of %d bytes is viewable", kind, len(plain))
					}
					continue
				}
				if !HighViewable(enc) {
					t.Fatalf("%s n=%d depth %d: not viewable", kind, n, d)
				}
				high, err := DecodeHigh16(nil, enc, refHigh, true)
				if err != nil {
					t.Fatalf("%s n=%d depth %d: %v", kind, n, d, err)
				}
				if len(high) != HighLen(len(plain)) {
					t.Fatalf("high form of %d bytes, want %d", len(high), HighLen(len(plain)))
				}
				// From the prefix a view reads: the same high form.
				need, ok := HighPrefixLen(enc[:min(len(enc), HighProbeLen)])
				if !ok || need > len(enc) {
					t.Fatalf("%s n=%d depth %d: prefix %d, %t of %d", kind, n, d, need, ok, len(enc))
				}
				fromPrefix, err := DecodeHigh16(nil, enc[:need], refHigh, true)
				if err != nil || !bytes.Equal(fromPrefix, high) {
					t.Fatalf("%s n=%d depth %d: from the %d-byte prefix: %v", kind, n, d, need, err)
				}
				if need < len(enc) {
					if _, err := DecodeHigh16(nil, enc[:need-1], refHigh, true); err == nil {
						t.Fatalf("%s n=%d depth %d: a prefix one byte short decoded", kind, n, d)
					}
				}
				view := make([]byte, len(plain))
				WidenHigh(view, high)
				want := bytes.Clone(plain)
				TruncateFloat32(want)
				if !bytes.Equal(view, want) {
					t.Fatalf("%s n=%d depth %d: view differs from the truncated exact bytes", kind, n, d)
				}
				cut := make([]byte, len(high))
				highForm(cut, plain)
				if !bytes.Equal(cut, high) {
					t.Fatalf("%s n=%d depth %d: highForm differs from the decoded high form", kind, n, d)
				}
				refHigh = high
				// The exact chain in split form: each level as the next
				// one's reference, and as plain bytes.
				form, err := DecodeForm16(nil, enc, refForm, true)
				if err != nil {
					t.Fatalf("%s n=%d depth %d: split form: %v", kind, n, d, err)
				}
				wantForm := make([]byte, len(plain))
				SplitForm(wantForm, plain)
				if !bytes.Equal(form, wantForm) {
					t.Fatalf("%s n=%d depth %d: split form differs", kind, n, d)
				}
				if got, err := DecodeForm16(nil, enc, refForm, false); err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("%s n=%d depth %d: plain from the split forms: %v", kind, n, d, err)
				}
				refForm = form
			}
		}
	}
}

// Only split16 float32 chunks have a high form; the others say so.
func TestDecodeHigh16Refuses(t *testing.T) {
	plain := floats32([]float32{1, 2, 3, 4})
	for _, c := range []Codec{Planes, Scaled, Zstd} {
		enc, _ := Encode(nil, c, Float32, plain, nil)
		if HighViewable(enc) {
			t.Errorf("%s chunk viewable", c)
		}
		if _, err := DecodeHigh16(nil, enc, nil, true); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", c, err)
		}
	}
	enc, _ := Encode(nil, Split16, BFloat16, plain, nil)
	if HighViewable(enc) {
		t.Error("split16 bfloat16 chunk viewable")
	}
	enc, _ = Encode(nil, Split16, Float32, plain, plain)
	if _, err := DecodeHigh16(nil, enc, nil, true); !errors.Is(err, ErrRefMismatch) {
		t.Errorf("delta without a reference: %v", err)
	}
}

// A flipped byte anywhere in a split16 chunk's high records must not pass
// as a high form: the high checksum catches what the decoder does not.
func TestDecodeHigh16Corruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 17))
	plain, ref := genPair(rng, Float32, 20000, "walk")
	refHigh := make([]byte, HighLen(len(ref)))
	highForm(refHigh, ref)
	want := make([]byte, HighLen(len(plain)))
	highForm(want, plain)
	for _, r := range [][]byte{nil, ref} {
		rh := refHigh
		if r == nil {
			rh = nil
		}
		enc, err := Encode(nil, Split16, Float32, plain, r)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := Inspect(enc)
		sp, err := parseSplit(enc[h.HeaderLen:], h.Delta)
		if err != nil {
			t.Fatal(err)
		}
		highEnd := h.HeaderLen + splitHeaderLen + len(sp.high)
		for k := 0; k < 300; k++ {
			bad := bytes.Clone(enc)
			i := h.HeaderLen + rng.IntN(highEnd-h.HeaderLen)
			bad[i] ^= byte(1 + rng.IntN(255))
			got, err := DecodeHigh16(nil, bad, rh, true)
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("byte %d flipped: wrong high form accepted", i)
			}
		}
	}
}

// FuzzDecodeHigh16: any bytes must give a high form of the right length or
// an error wrapping a sentinel, never a panic; a verified high form of a
// chunk that also decodes exactly must be that chunk's.
func FuzzDecodeHigh16(f *testing.F) {
	seedChunks(f)
	f.Fuzz(func(t *testing.T, enc []byte, useRef bool, ref []byte) {
		if h, err := Inspect(enc); err == nil && h.PlainLen > 1<<24 {
			return
		}
		full := enc
		var refHigh []byte
		if useRef {
			refHigh = make([]byte, HighLen(len(ref)))
			highForm(refHigh, ref)
		}
		need, ok := HighPrefixLen(enc)
		// A view reading from the object store asks with a prefix of a
		// guessed length: any prefix that answers must answer the same.
		for _, k := range []int{HighProbeLen, HighProbeLen + 7, len(enc) / 3, len(enc) - 1} {
			if k < 0 || k > len(enc) {
				continue
			}
			if n, pok := HighPrefixLen(enc[:k]); pok && (!ok || n != need) {
				t.Fatalf("a %d-byte prefix says %d bytes (%v), the whole chunk %d (%v)", k, n, pok, need, ok)
			}
		}
		if ok && need < len(enc) {
			enc = enc[:need] // what a view reads
		}
		high, err := DecodeHigh16(nil, enc, refHigh, true)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrRefMismatch) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		h, _ := Inspect(enc)
		if len(high) != HighLen(h.PlainLen) {
			t.Fatalf("high form of %d bytes for %d plain", len(high), h.PlainLen)
		}
		var r []byte
		if useRef {
			r = ref
		}
		if useRef && len(ref) >= 4 {
			form := make([]byte, len(ref))
			SplitForm(form, ref)
			got, errForm := DecodeForm16(nil, full, form, false)
			want, errExact := Decode(nil, full, ref)
			if errForm == nil && errExact == nil && !bytes.Equal(got, want) {
				t.Fatal("the split-form decode differs from the exact decode")
			}
			if errForm == nil && errExact != nil {
				t.Fatalf("the split-form decode accepted what Decode refused: %v", errExact)
			}
		}
		if out, err := Decode(nil, full, r); err == nil {
			want := make([]byte, len(high))
			highForm(want, out)
			if !bytes.Equal(high, want) {
				t.Fatal("high form differs from the exact decode's high halves")
			}
		}
	})
}

// highForm writes the high form of plain bytes (a float32 chunk) into
// high, as DecodeHigh16 rebuilds it.
func highForm(high, plain []byte) {
	n := len(plain) / 4
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(high[2*i:], uint16(binary.LittleEndian.Uint32(plain[4*i:])>>16))
	}
	copy(high[2*n:], plain[4*n:])
}

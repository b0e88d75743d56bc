package encode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// seedChunks returns valid chunks of every codec and dtype for the decoder
// fuzzer to mutate, with the reference each needs.
func seedChunks(f *testing.F) {
	plain := floats32([]float32{0.5, -0.25, 1e-3, 3, 3, 3, 0, -0, 1e-30})
	ref := floats32([]float32{0.5, -0.26, 1e-3, 3.1, 3, 2, 0, 0, 2e-30})
	for _, c := range Codecs() {
		for _, dt := range allDTypes {
			for _, r := range [][]byte{nil, ref} {
				enc, err := Encode(nil, c, dt, plain, r)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(enc, r != nil, ref)
			}
		}
	}
	// Grouped and masked planes chunks (golden_test.go writes them).
	for _, dt := range []DType{Float32, BFloat16, Float64} {
		ref, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("format-v%d", formatVersion), fmt.Sprintf("ref-%s.bin", dt)))
		if err != nil {
			f.Fatal(err)
		}
		names, _ := filepath.Glob(filepath.Join("testdata", fmt.Sprintf("format-v%d", formatVersion), fmt.Sprintf("planes-%s-grouped-*.chunk", dt)))
		for _, name := range names {
			enc, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(enc, true, ref)
		}
	}
	// A chunk with nested sparse records (format 3).
	dir := filepath.Join("testdata", fmt.Sprintf("format-v%d", formatVersion))
	nested, err1 := os.ReadFile(filepath.Join(dir, "scaled-float32-nested.chunk"))
	nestedRef, err2 := os.ReadFile(filepath.Join(dir, "nested-ref-float32.bin"))
	if err1 != nil || err2 != nil {
		f.Fatal(err1, err2)
	}
	f.Add(nested, true, nestedRef)
	f.Add([]byte{}, false, []byte{})
	f.Add([]byte{chunkMagic, formatVersion, byte(Planes), byte(Float32), 0xff, 0xff, 0xff, 0x3f, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false, []byte(nil))
}

// FuzzDecode: any bytes, with or without a reference, must give an exact
// round trip or an error wrapping one of the sentinels, never a panic.
// A chunk that decodes must re-decode identically and match its CRC.
func FuzzDecode(f *testing.F) {
	seedChunks(f)
	f.Fuzz(func(t *testing.T, enc []byte, useRef bool, ref []byte) {
		if !useRef {
			ref = nil
		}
		if h, err := Inspect(enc); err == nil && h.PlainLen > 1<<24 {
			// Legal but the fuzzer's memory is small; the header check is
			// what is under test, and it passed.
			return
		}
		out, err := Decode(nil, enc, ref)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) &&
				!errors.Is(err, ErrRefMismatch) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("decode error wraps no sentinel: %v", err)
			}
			return
		}
		h, err := Inspect(enc)
		if err != nil || h.PlainLen != len(out) || checksum(out) != h.CRC {
			t.Fatalf("decoded %d bytes, header %+v (%v)", len(out), h, err)
		}
	})
}

// FuzzRoundTrip: every codec and dtype must return exactly what it was
// given, for any plain bytes and any same-length reference.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello, tensors"), []byte("hello, tensorz"), uint8(Planes), uint8(Float32), true)
	f.Add(floats32([]float32{1, 2, 3, -0}), floats32([]float32{1, 2.5, 3, 0}), uint8(DynRLE), uint8(Float32), true)
	f.Add(make([]byte, 33), make([]byte, 33), uint8(RLE4), uint8(Float64), false)
	f.Add(bytes.Repeat([]byte{0, 0x80}, 300), bytes.Repeat([]byte{1, 0x80}, 300), uint8(Planes), uint8(BFloat16), true)
	f.Fuzz(func(t *testing.T, plain, ref []byte, codec, dtype uint8, useRef bool) {
		c := Codec(codec % numCodecs)
		dt := DType(dtype % 5)
		if len(ref) != len(plain) {
			// Make a same-length reference from what the fuzzer gave.
			r := make([]byte, len(plain))
			copy(r, ref)
			ref = r
		}
		if !useRef {
			ref = nil
		}
		enc, err := Encode(nil, c, dt, plain, ref)
		if err != nil {
			t.Fatalf("%s/%s encode: %v", c, dt, err)
		}
		h, err := Inspect(enc)
		if err != nil {
			t.Fatalf("%s/%s inspect: %v", c, dt, err)
		}
		r := ref
		if !h.Delta {
			r = nil
		}
		out, err := Decode(nil, enc, r)
		if err != nil || !bytes.Equal(out, plain) {
			t.Fatalf("%s/%s: round trip failed: %v", c, dt, err)
		}
	})
}

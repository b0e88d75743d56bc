package encode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseGrouping(t *testing.T) {
	for _, tc := range []struct {
		src  []byte
		ok   bool
		k    int
		rest int
	}{
		{[]byte{2, 100, 9}, true, 2, 1},
		{[]byte{1}, true, 1, 0},
		{[]byte{4, 1, 2, 3}, true, 4, 0},
		{[]byte{}, false, 0, 0},
		{[]byte{0}, false, 0, 0},
		{[]byte{9, 1, 2, 3, 4, 5, 6, 7, 8}, false, 0, 0},
		{[]byte{3, 5}, false, 0, 0},    // truncated
		{[]byte{3, 5, 5}, false, 0, 0}, // not increasing
		{[]byte{3, 6, 5}, false, 0, 0},
	} {
		g, rest, err := parseGrouping(tc.src, false)
		if (err == nil) != tc.ok {
			t.Errorf("%v: err %v, want ok=%t", tc.src, err, tc.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: %v does not wrap ErrCorrupt", tc.src, err)
			}
			continue
		}
		if g.k != tc.k || len(rest) != tc.rest {
			t.Errorf("%v: k=%d rest=%d, want %d %d", tc.src, g.k, len(rest), tc.k, tc.rest)
		}
		var hdr []byte
		if hdr = g.appendHeader(nil); !bytes.Equal(hdr, tc.src[:len(tc.src)-tc.rest]) {
			t.Errorf("%v: header written back as %v", tc.src, hdr)
		}
	}
}

func TestGroupTable(t *testing.T) {
	g := grouping{k: 3, thr: [7]byte{10, 200}}
	gt := g.table()
	for c, want := range map[int]byte{0: 0, 9: 0, 10: 1, 199: 1, 200: 2, 255: 2} {
		if gt[c] != want {
			t.Errorf("context %d in group %d, want %d", c, gt[c], want)
		}
	}
}

// deadUnits makes a delta pair like a layer with dead units: a third of
// the elements unchanged, the others moved by an amount that does not
// depend on their size (as Adam moves weights), so that small weights
// change by many ulps and large ones by few.
func deadUnits(rng *rand.Rand, n int) (plain, ref []byte) {
	plain, ref = make([]byte, 4*n), make([]byte, 4*n)
	for i := 0; i < n; i++ {
		r := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(12))-14))
		p := r
		if i%3 != 0 {
			p = r + float32(rng.NormFloat64()*1e-5)
		}
		binary.LittleEndian.PutUint32(ref[4*i:], math.Float32bits(r))
		binary.LittleEndian.PutUint32(plain[4*i:], math.Float32bits(p))
	}
	return plain, ref
}

// On such data the encoder must find the grouping and the mask, and they
// must pay.
func TestGroupingChosenAndPays(t *testing.T) {
	plain, ref := deadUnits(rand.New(rand.NewPCG(31, 32)), 1<<16)
	cd := NewCoder()
	enc, err := cd.Encode(nil, Planes, Float32, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	if m := enc[headerLen]; m&modeGrouped == 0 || m&modeMasked == 0 {
		t.Fatalf("mode byte %#x: want grouped and masked", m)
	}
	cd.pl.noGroups = true
	flat, err := cd.Encode(nil, Planes, Float32, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	if float64(len(enc)) > 0.95*float64(len(flat)) {
		t.Errorf("grouped %d bytes, plain planes %d: want at least 5%% less", len(enc), len(flat))
	}
	out, err := Decode(nil, enc, ref)
	if err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("round trip: %v", err)
	}
}

// The grouped record's invariants are checked, not trusted.
func TestGroupedCorrupt(t *testing.T) {
	plain, ref := deadUnits(rand.New(rand.NewPCG(33, 34)), 1000)
	cd := NewCoder()
	cd.pl.forceChoice = &planeChoice{mode: modeSUB, grp: grouping{k: 2, thr: [7]byte{0x70}, masked: true}}
	enc, err := cd.Encode(nil, Planes, Float32, plain, ref)
	if err != nil {
		t.Fatal(err)
	}
	cd.pl.forceChoice = &planeChoice{mode: modeXOR, grp: grouping{k: 3, thr: [7]byte{0x70, 0x78}, masked: true}}
	bf, err := cd.Encode(nil, Planes, BFloat16, plain[:2*999], ref[:2*999])
	if err != nil {
		t.Fatal(err)
	}
	cd.pl.forceChoice = nil
	mode := headerLen // offset of the mode byte
	for _, tc := range []struct {
		name  string
		chunk []byte
		edit  func(b []byte)
		ref   []byte
		want  string
	}{
		{"unknown mode bits", enc, func(b []byte) { b[mode] |= 0x40 }, ref, "planes mode"},
		{"flags on unchanged record", enc, func(b []byte) { b[mode] = byte(modeSame) | modeMasked }, ref, "planes mode"},
		{"grouped flag, one group", enc, func(b []byte) { b[mode+2] = 1 }, ref, "one group"},
		{"thresholds not increasing", bf, func(b []byte) { b[mode+4] = 0x60 }, ref[:2*999], "not increasing"},
		{"mask past the last element", bf, nil, ref[:2*999], "past the last element"},
	} {
		b := append([]byte(nil), tc.chunk...)
		if tc.edit != nil {
			tc.edit(b)
		} else {
			// Set a padding bit of the mask: re-encode with one.
			b = maskPaddingChunk(t, cd, plain[:2*999], ref[:2*999])
		}
		_, err := Decode(nil, b, tc.ref)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decode gave %v, want ErrCorrupt (%s)", tc.name, err, tc.want)
		}
	}
}

// maskPaddingChunk makes a bf16 chunk of 999 elements whose stored mask
// has its padding bit set; the header's CRC is of the right plain bytes,
// so only the mask check can refuse it.
func maskPaddingChunk(t *testing.T, cd *Coder, plain, ref []byte) []byte {
	n := len(plain) / 2
	mask := make([]byte, (n+7)/8)
	buildMask(mask, plain, ref, n, 2)
	mask[len(mask)-1] |= 0x80
	payload := []byte{byte(modeXOR) | modeMasked, 0, blkStored}
	payload = append(payload, mask...)
	h := Header{Codec: Planes, DType: BFloat16, Delta: true, PlainLen: len(plain), CRC: checksum(plain)}
	b := make([]byte, headerLen, headerLen+len(payload))
	putHeader(b, h, len(payload))
	return append(b, payload...)
}

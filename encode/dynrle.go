package encode

import (
	"fmt"
	"math/bits"
)

// The paper's codecs (Section 3.1, Algorithm 1, Fig. 5, Section 3.3.2):
//
// Delta: each element is XORed with its reference; the XOR's heading zeros
// are counted, the count (capped at 2^h-1) is written in h bits, then the
// remaining width*8 - count low bits of the XOR. dynrle chooses h per chunk
// with Algorithm 1, rle4 fixes h = 4. For a w-byte element h ranges over
// 0..log2(8w): 0..5 for fp32 as in the paper, 0..4 for 16-bit floats, 0..6 for
// fp64 and 0..3 for Bytes (a byte has at most 8 heading zeros).
//
// Baseline: the exponent of each element is Huffman coded (canonical, one
// code per chunk), sign and mantissa follow raw. For Bytes the whole byte is
// Huffman coded.
//
// Payloads: delta = [h] bitstream tail; baseline = table bitstream tail,
// where tail is the plain bytes after the last whole element.

// maxHeadingBits is the largest useful h for a width: 2^h-1 >= 8w-1.
func maxHeadingBits(w int) uint { return uint(bits.Len(uint(8*w))) - 1 }

// headingZeros of an 8w-bit word (8w when the word is zero).
func headingZeros(x uint64, w int) uint {
	return uint(bits.LeadingZeros64(x)) - uint(64-8*w)
}

// chooseHeadingBits is Algorithm 1 evaluated from a histogram of heading
// zeros: size_i = sum over p of (8w + i - min(2^i-1, heading_zeros(p))).
// Ties go to the smaller i.
func chooseHeadingBits(hist []uint64, w int) uint {
	W := uint64(8 * w)
	best, bestSize := uint(0), uint64(0)
	for i := uint(0); i <= maxHeadingBits(w); i++ {
		size := uint64(0)
		capZ := uint64(1)<<i - 1
		for hz, n := range hist {
			size += n * (W + uint64(i) - min(capZ, uint64(hz)))
		}
		if i == 0 || size < bestSize {
			best, bestSize = i, size
		}
	}
	return best
}

func encodeRLEDelta(dst []byte, dt DType, plain, ref []byte, fixed bool) []byte {
	w := dt.Width()
	n := len(plain) / w
	var h uint = 4
	if !fixed {
		hist := make([]uint64, 8*w+1)
		for i := 0; i < n; i++ {
			x := loadWord(plain[i*w:], w) ^ loadWord(ref[i*w:], w)
			hist[headingZeros(x, w)]++
		}
		h = chooseHeadingBits(hist, w)
	}
	dst = append(dst, byte(h))
	bw := bitWriter{out: dst}
	capZ := uint(1)<<h - 1
	W := uint(8 * w)
	for i := 0; i < n; i++ {
		x := loadWord(plain[i*w:], w) ^ loadWord(ref[i*w:], w)
		z := min(headingZeros(x, w), capZ)
		bw.write(uint64(z), h)
		bw.write64(x, W-z) // x has no bits above W-z: they are heading zeros
	}
	dst = bw.finish()
	return append(dst, plain[n*w:]...)
}

func decodeRLEDelta(out []byte, dt DType, payload, ref []byte, fixed bool) error {
	w := dt.Width()
	n := len(out) / w
	tail := len(out) - n*w
	if len(payload) < 1+tail {
		return fmt.Errorf("%w: rle payload too short", ErrCorrupt)
	}
	h := uint(payload[0])
	if fixed && h != 4 || !fixed && h > maxHeadingBits(w) {
		return fmt.Errorf("%w: heading bits %d for %d-byte elements", ErrCorrupt, h, w)
	}
	W := uint(8 * w)
	br := newBitReader(payload[1 : len(payload)-tail])
	for i := 0; i < n; i++ {
		z := uint(br.read(h))
		if z > W {
			return fmt.Errorf("%w: %d heading zeros in a %d-bit word", ErrCorrupt, z, W)
		}
		x := br.read64(W - z)
		storeWord(out[i*w:], w, x^loadWord(ref[i*w:], w))
		if br.overrun() {
			return fmt.Errorf("%w: rle bitstream truncated at element %d", ErrCorrupt, i)
		}
	}
	if !br.finished() {
		return fmt.Errorf("%w: rle bitstream has trailing bits", ErrCorrupt)
	}
	copy(out[n*w:], payload[len(payload)-tail:])
	return nil
}

func encodeHuffBaseline(dst []byte, dt DType, plain []byte) []byte {
	l := layoutOf(dt)
	w := l.w
	n := len(plain) / w
	counts := make([]uint32, 1<<l.expBits)
	for i := 0; i < n; i++ {
		e, _ := l.split(loadWord(plain[i*w:], w))
		counts[e]++
	}
	code := newHuffCode(counts)
	dst = code.appendTable(dst)
	bw := bitWriter{out: dst}
	rb := l.restBits()
	for i := 0; i < n; i++ {
		e, rest := l.split(loadWord(plain[i*w:], w))
		bw.write(uint64(code.codes[e]), uint(code.lens[e]))
		bw.write64(rest, rb)
	}
	dst = bw.finish()
	return append(dst, plain[n*w:]...)
}

func decodeHuffBaseline(out []byte, dt DType, payload []byte) error {
	l := layoutOf(dt)
	w := l.w
	n := len(out) / w
	tail := len(out) - n*w
	if len(payload) < tail {
		return fmt.Errorf("%w: huffman payload too short", ErrCorrupt)
	}
	var d huffDecoder
	rest, err := d.readTable(payload[:len(payload)-tail], 1<<l.expBits)
	if err != nil {
		return err
	}
	br := newBitReader(rest)
	rb := l.restBits()
	for i := 0; i < n; i++ {
		e, ok := d.decode(&br)
		if !ok {
			return fmt.Errorf("%w: invalid huffman code at element %d", ErrCorrupt, i)
		}
		r := br.read64(rb)
		storeWord(out[i*w:], w, l.join(uint64(e), r))
		if br.overrun() {
			return fmt.Errorf("%w: huffman bitstream truncated at element %d", ErrCorrupt, i)
		}
	}
	if !br.finished() {
		return fmt.Errorf("%w: huffman bitstream has trailing bits", ErrCorrupt)
	}
	copy(out[n*w:], payload[len(payload)-tail:])
	return nil
}

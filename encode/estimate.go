package encode

import (
	"encoding/binary"
	"math"
)

// Cheap size estimates for the planes codec's choices. Everything here works
// from byte histograms, usually of a sample, so that the encoder runs only
// the coder it picks.

// histogram counts byte values with four interleaved tables, which keeps
// the increments of repeated values from serialising on one counter.
func histogram(b []byte, h *[256]uint32) {
	var c [4][256]uint32
	i := 0
	for ; i+4 <= len(b); i += 4 {
		c[0][b[i]]++
		c[1][b[i+1]]++
		c[2][b[i+2]]++
		c[3][b[i+3]]++
	}
	for ; i < len(b); i++ {
		c[0][b[i]]++
	}
	for v := range h {
		h[v] = c[0][v] + c[1][v] + c[2][v] + c[3][v]
	}
}

// histogramStride counts every stride-th byte, unrolled like histogram.
func histogramStride(b []byte, stride int, h *[256]uint32) int {
	var c [4][256]uint32
	i, s4 := 0, 4*stride
	for ; i+3*stride < len(b); i += s4 {
		c[0][b[i]]++
		c[1][b[i+stride]]++
		c[2][b[i+2*stride]]++
		c[3][b[i+3*stride]]++
	}
	for ; i < len(b); i += stride {
		c[0][b[i]]++
	}
	total := 0
	for v := range h {
		h[v] = c[0][v] + c[1][v] + c[2][v] + c[3][v]
		total += int(h[v])
	}
	return total
}

// log2Tab[i] = log2(1 + i/256), for fastLog2's interpolation.
var log2Tab = func() (t [257]float64) {
	for i := range t {
		t[i] = math.Log2(1 + float64(i)/256)
	}
	return t
}()

// fastLog2 is log2(x) for x > 0 within about 3e-6: a table of the
// mantissa's top 8 bits, interpolated. The estimates call it per histogram
// bin, where math.Log2 was a visible part of the encode time.
func fastLog2(x float64) float64 {
	b := math.Float64bits(x)
	e := float64(int(b>>52&0x7FF) - 1023)
	idx := b >> 44 & 0xFF
	frac := float64(b&(1<<44-1)) * (1.0 / (1 << 44))
	return e + log2Tab[idx] + frac*(log2Tab[idx+1]-log2Tab[idx])
}

// entropyBits is the order-0 entropy, in bits, of n symbols counted in h.
func entropyBits(h *[256]uint32, n int) float64 {
	if n == 0 {
		return 0
	}
	sum := 0.0
	for _, c := range h {
		if c > 1 {
			fc := float64(c)
			sum += fc * fastLog2(fc)
		}
	}
	fn := float64(n)
	return fn*fastLog2(fn) - sum
}

// blockModel is what the encoder knows of a block before coding it. Blocks
// of 16 KiB and more are sampled (every 4th byte); the entropy and the
// dominant symbol's share come out within a percent, which is all the
// choice needs. TestBlockEstimates checks the estimates against real sizes.
type blockModel struct {
	n      int
	hist   [256]uint32
	total  int // symbols counted (n, or the sample size)
	maxc   uint32
	maxSym byte
	used   int     // distinct byte values seen
	bits   float64 // order-0 entropy, in bits, scaled to the whole block
}

const sampleFrom = 16 << 10

func (bm *blockModel) analyse(blk []byte) {
	bm.n = len(blk)
	if len(blk) >= sampleFrom {
		bm.total = histogramStride(blk, 4, &bm.hist)
	} else {
		histogram(blk, &bm.hist)
		bm.total = len(blk)
	}
	bm.maxc, bm.used = 0, 0
	for v, c := range bm.hist {
		if c == 0 {
			continue
		}
		bm.used++
		if c > bm.maxc {
			bm.maxc, bm.maxSym = c, byte(v)
		}
	}
	scale := float64(bm.n) / float64(bm.total)
	bm.bits = entropyBits(&bm.hist, bm.total) * scale
}

// pmax is the dominant symbol's share.
func (bm *blockModel) pmax() float64 { return float64(bm.maxc) / float64(bm.total) }

// constant reports whether the block is one repeated byte: certain when no
// sample was taken, checked in full when the sample says so.
func (bm *blockModel) constant(blk []byte) bool {
	if int(bm.maxc) != bm.total {
		return false
	}
	if bm.total == len(blk) {
		return true
	}
	rep := uint64(bm.maxSym) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(blk); i += 8 {
		if binary.LittleEndian.Uint64(blk[i:]) != rep {
			return false
		}
	}
	for ; i < len(blk); i++ {
		if blk[i] != bm.maxSym {
			return false
		}
	}
	return true
}

// Size estimates in bytes. huff: Huffman spends a whole bit on a symbol of
// probability p > 1/2 where the entropy says -log2(p); otherwise it stays
// within a few percent of the entropy. Tables: about half a byte per used
// symbol. fse: the entropy plus its table. sparse: the bitmap at its binary
// entropy and the other values at theirs, each with a Huffman table.
func (bm *blockModel) estHuff() float64 {
	p := bm.pmax()
	b := bm.bits * 1.01
	if p > 0.5 {
		b += p * float64(bm.n) * (1 + fastLog2(p))
	}
	return b/8 + float64(bm.used)/2 + 8
}

func (bm *blockModel) estFSE() float64 { return bm.bits/8 + float64(bm.used)*0.6 + 8 }

func (bm *blockModel) estSparse() float64 {
	fn := float64(bm.n)
	pm := bm.pmax()
	q := 1 - pm
	if q <= 0 {
		return fn
	}
	h2 := -q*fastLog2(q) - pm*fastLog2(pm)
	bitmap := fn * h2 * 1.05
	// The other values' entropy: the block's minus the bitmap's share.
	vals := max(bm.bits-fn*h2, 0)
	return (bitmap+vals*1.02)/8 + float64(bm.used)/2 + 24
}

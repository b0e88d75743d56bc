package encode

import (
	"fmt"
	"sort"
)

// A canonical Huffman coder for the dynrle baseline (the paper's Section
// 3.3.2: Huffman-coded exponents). Written here rather than taken from huff0
// because fp64 exponents have 2048 symbols and huff0 stops at 256.
//
// Codes are limited to huffMaxLen bits so the decoder is one table lookup.
// The code table is serialised as one byte per symbol length (0..12), with
// runs of unused symbols as 0x80|(run-1).
const huffMaxLen = 12

type huffCode struct {
	lens  []uint8
	codes []uint16 // bit-reversed canonical codes, ready for an LSB-first writer
}

// huffLengths computes length-limited code lengths for counts. Lengths are
// limited by flattening the counts and retrying, which converges because
// len(counts) <= 1<<(huffMaxLen-1).
func huffLengths(counts []uint32, lens []uint8) {
	type node struct {
		w      uint64
		parent int32
	}
	work := append([]uint32(nil), counts...)
	for {
		clear(lens)
		syms := make([]int, 0, len(work))
		for s, c := range work {
			if c > 0 {
				syms = append(syms, s)
			}
		}
		switch len(syms) {
		case 0:
			return
		case 1:
			lens[syms[0]] = 1
			return
		}
		sort.Slice(syms, func(a, b int) bool {
			ca, cb := work[syms[a]], work[syms[b]]
			if ca != cb {
				return ca < cb
			}
			return syms[a] < syms[b]
		})
		// Two-queue Huffman: leaves sorted ascending, internal nodes are
		// created in ascending weight order, so each step merges the two
		// lightest heads.
		nodes := make([]node, 0, 2*len(syms))
		for _, s := range syms {
			nodes = append(nodes, node{w: uint64(work[s]), parent: -1})
		}
		leaf, inner := 0, len(syms)
		pick := func() int {
			if leaf < len(syms) && (inner >= len(nodes) || nodes[leaf].w <= nodes[inner].w) {
				leaf++
				return leaf - 1
			}
			inner++
			return inner - 1
		}
		for i := 0; i < len(syms)-1; i++ {
			a, b := pick(), pick()
			nodes = append(nodes, node{w: nodes[a].w + nodes[b].w, parent: -1})
			p := int32(len(nodes) - 1)
			nodes[a].parent, nodes[b].parent = p, p
		}
		depth := make([]uint8, len(nodes))
		for i := len(nodes) - 2; i >= 0; i-- {
			depth[i] = depth[nodes[i].parent] + 1
		}
		maxLen := uint8(0)
		for i, s := range syms {
			lens[s] = depth[i]
			maxLen = max(maxLen, depth[i])
		}
		if maxLen <= huffMaxLen {
			return
		}
		for s, c := range work {
			if c > 0 {
				work[s] = c/2 + 1
			}
		}
	}
}

// canonicalCodes assigns canonical codes to lens, bit-reversed for LSB-first
// output. It reports false when lens are not a prefix code (over-subscribed).
func canonicalCodes(lens []uint8, codes []uint16) bool {
	var count [huffMaxLen + 1]int
	for _, l := range lens {
		if l > huffMaxLen {
			return false
		}
		count[l]++
	}
	count[0] = 0
	var next [huffMaxLen + 2]int
	code := 0
	for l := 1; l <= huffMaxLen; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
		if code+count[l] > 1<<l {
			return false
		}
	}
	for s, l := range lens {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		codes[s] = reverseBits(uint16(c), l)
	}
	return true
}

func reverseBits(c uint16, n uint8) uint16 {
	var r uint16
	for i := uint8(0); i < n; i++ {
		r = r<<1 | c&1
		c >>= 1
	}
	return r
}

// newHuffCode builds the code for a histogram over len(counts) symbols.
func newHuffCode(counts []uint32) huffCode {
	h := huffCode{lens: make([]uint8, len(counts)), codes: make([]uint16, len(counts))}
	huffLengths(counts, h.lens)
	canonicalCodes(h.lens, h.codes)
	return h
}

// appendTable serialises the code lengths.
func (h huffCode) appendTable(dst []byte) []byte {
	for i := 0; i < len(h.lens); {
		if h.lens[i] != 0 {
			dst = append(dst, h.lens[i])
			i++
			continue
		}
		run := 0
		for i < len(h.lens) && h.lens[i] == 0 && run < 128 {
			run++
			i++
		}
		dst = append(dst, 0x80|byte(run-1))
	}
	return dst
}

// huffDecoder is a single-level lookup table: entry = symbol<<4 | length,
// length 0 marks bit patterns no code starts with (only in incomplete codes).
type huffDecoder struct {
	table [1 << huffMaxLen]uint16
}

// readHuffTable parses a table for nsym symbols and returns the rest of src.
func (d *huffDecoder) readTable(src []byte, nsym int) ([]byte, error) {
	lens := make([]uint8, nsym)
	i, pos := 0, 0
	for i < nsym {
		if pos >= len(src) {
			return nil, fmt.Errorf("%w: huffman table truncated", ErrCorrupt)
		}
		b := src[pos]
		pos++
		if b&0x80 != 0 {
			run := int(b&0x7F) + 1
			if i+run > nsym {
				return nil, fmt.Errorf("%w: huffman table overruns alphabet", ErrCorrupt)
			}
			i += run
			continue
		}
		if b > huffMaxLen || b == 0 {
			return nil, fmt.Errorf("%w: huffman code length %d", ErrCorrupt, b)
		}
		lens[i] = b
		i++
	}
	codes := make([]uint16, nsym)
	if !canonicalCodes(lens, codes) {
		return nil, fmt.Errorf("%w: huffman lengths are not a prefix code", ErrCorrupt)
	}
	clear(d.table[:])
	for s, l := range lens {
		if l == 0 {
			continue
		}
		e := uint16(s)<<4 | uint16(l)
		for j := int(codes[s]); j < len(d.table); j += 1 << l {
			d.table[j] = e
		}
	}
	return src[pos:], nil
}

// decode reads one symbol; ok is false on a pattern that no code starts with.
func (d *huffDecoder) decode(r *bitReader) (sym int, ok bool) {
	e := d.table[r.peek(huffMaxLen)]
	l := uint(e & 15)
	if l == 0 {
		return 0, false
	}
	r.skip(l)
	return int(e >> 4), true
}

package encode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// A plane is cut into blocks of at most planeBlock bytes; each block is one
// record: a method byte, then
//
//	blkStored: the bytes
//	blkRLE:    one byte, repeated for the whole block
//	blkHuff4:  uvarint length, huff0 4-stream block (table included)
//	blkHuff1:  uvarint length, huff0 1-stream block (table included)
//	blkFSE:    uvarint length, FSE block
//	blkZstd:   uvarint length, zstd frame
//	blkSparse: dominant byte, bitmap record, values record (sparse.go)
//
// The block length is implied by the plane length, so a decoder always
// knows how many bytes a record must produce.
const planeBlock = 1 << 16

const (
	blkStored = iota
	blkRLE
	blkHuff4
	blkHuff1
	blkFSE
	blkZstd
	blkSparse
	numBlk
)

var blkNames = [numBlk]string{"stored", "rle", "huff4", "huff1", "fse", "zstd", "sparse"}

// blockStats counts, per method, how many blocks and bytes the encoder chose;
// the ratio report prints it so the choice heuristics can be checked.
type blockStats struct {
	Blocks [numBlk]int
	In     [numBlk]int
	Out    [numBlk]int
}

func (s *blockStats) String() string {
	var sb strings.Builder
	for m := range s.Blocks {
		if s.Blocks[m] > 0 {
			fmt.Fprintf(&sb, "    %-7s %6d blocks %11d -> %11d bytes (%.3f)\n", blkNames[m], s.Blocks[m], s.In[m], s.Out[m], float64(s.Out[m])/float64(s.In[m]))
		}
	}
	return sb.String()
}

func (s *blockStats) add(m, in, out int) {
	s.Blocks[m]++
	s.In[m] += in
	s.Out[m] += out
}

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

// entropyBytes is the order-0 entropy of a histogram of n symbols, in bytes:
// the floor below which no order-0 coder can go.
func entropyBytes(h *[256]uint32, n int) float64 {
	if n == 0 {
		return 0
	}
	fn := float64(n)
	bitsSum := 0.0
	for _, c := range h {
		if c != 0 {
			bitsSum -= float64(c) * math.Log2(float64(c)/fn)
		}
	}
	return bitsSum / 8
}

// blockModel is what the encoder knows of a block before coding it: its
// histogram, from which every candidate's size is estimated, so that only
// the chosen coder runs (trying them all would cost several times the
// encode time; the estimates are checked against real sizes by
// TestBlockEstimates).
type blockModel struct {
	n      int
	hist   [256]uint32
	maxc   uint32
	maxSym byte
	used   int     // distinct byte values
	bits   float64 // order-0 entropy of the block, in bits
	same   int     // positions equal to the previous byte (LZ/run hint)
}

func (bm *blockModel) analyse(blk []byte) {
	bm.n = len(blk)
	histogram(blk, &bm.hist)
	bm.maxc, bm.used, bm.bits = 0, 0, 0
	fn := float64(bm.n)
	for v, c := range bm.hist {
		if c == 0 {
			continue
		}
		bm.used++
		if c > bm.maxc {
			bm.maxc, bm.maxSym = c, byte(v)
		}
		bm.bits -= float64(c) * log2(float64(c)/fn)
	}
}

// Size estimates in bytes. huff: Huffman spends a whole bit on a symbol of
// probability p > 1/2 where the entropy says -log2(p); otherwise it stays
// within a few percent of the entropy. Tables: about half a byte per used
// symbol. fse: the entropy plus its table. sparse: the bitmap at its binary
// entropy and the other values at theirs, each with a Huffman table.
func (bm *blockModel) estHuff() float64 {
	fn := float64(bm.n)
	p := float64(bm.maxc) / fn
	b := bm.bits * 1.01
	if p > 0.5 {
		b += float64(bm.maxc) * (1 + log2(p))
	}
	return b/8 + float64(bm.used)/2 + 8
}

func (bm *blockModel) estFSE() float64 { return bm.bits/8 + float64(bm.used)*0.6 + 8 }

func (bm *blockModel) estSparse() float64 {
	fn := float64(bm.n)
	q := 1 - float64(bm.maxc)/fn
	if q <= 0 {
		return fn
	}
	bitmap := fn * (-q*log2(q) - (1-q)*log2(1-q)) * 1.05
	// Entropy of the other values: the block's, minus the dominant symbol's
	// and the bitmap's share.
	pm := float64(bm.maxc) / fn
	vals := bm.bits + float64(bm.maxc)*log2(pm) - fn*q*log2(q)
	vals = max(vals, 0)
	return (bitmap+vals*1.02)/8 + float64(bm.used)/2 + 24
}

func log2(x float64) float64 { return math.Log2(x) }

// fseBias: FSE decodes at about a third of huff0's speed, so it is chosen
// only when its estimate beats the best alternative by this factor.
var fseBias = 0.90

// appendBlock codes one block with the method the estimates favour.
// depth limits sparse blocks nested in sparse blocks (the bitmap of a very
// sparse plane is itself sparse).
func (ps *planeScratch) appendBlock(dst, blk []byte, depth int) []byte {
	bm := &ps.bm
	bm.analyse(blk)
	n := len(blk)
	if int(bm.maxc) == n {
		ps.stats.add(blkRLE, n, 2)
		return append(dst, blkRLE, blk[0])
	}
	huff, fseEst, sparse := bm.estHuff(), bm.estFSE(), float64(n)
	if depth < 2 && bm.maxc > uint32(n/2) && n >= 64 {
		sparse = bm.estSparse()
	}
	best := min(huff, sparse)
	method := blkHuff4
	switch {
	case fseEst < fseBias*best && fseEst < 0.97*float64(n):
		method = blkFSE
	case sparse < huff && sparse < 0.97*float64(n):
		method = blkSparse
	case huff < 0.98*float64(n):
		method = blkHuff4
		if n < 4096 {
			method = blkHuff1
		}
	default:
		method = blkStored
	}
	if method == blkSparse {
		return ps.appendSparse(dst, blk, bm.maxSym, depth)
	}
	var out []byte
	var err error
	switch method {
	case blkHuff4, blkHuff1:
		out, err = ps.huff(blk, method)
	case blkFSE:
		ps.fse.Out = ps.fseOut[:0]
		out, err = fse.Compress(blk, &ps.fse)
		ps.fseOut = ps.fse.Out
	}
	if method == blkStored || err != nil || len(out) >= n {
		return ps.appendStored(dst, blk)
	}
	start := len(dst)
	dst = append(dst, byte(method))
	dst = binary.AppendUvarint(dst, uint64(len(out)))
	dst = append(dst, out...)
	ps.stats.add(method, n, len(dst)-start)
	return dst
}

// appendSparse writes a sparse record; the bitmap and values live in
// per-depth scratch so nested records do not clobber their parent's.
func (ps *planeScratch) appendSparse(dst, blk []byte, m byte, depth int) []byte {
	sc := &ps.sparse[depth]
	sc.bitmap = grow(sc.bitmap, (len(blk)+7)/8)
	sc.vals = splitSparse(blk, m, sc.bitmap, sc.vals[:0])
	start := len(dst)
	dst = append(dst, blkSparse, m)
	dst = ps.appendBlock(dst, sc.bitmap, depth+1)
	dst = ps.appendBlock(dst, sc.vals, depth+1)
	ps.stats.add(blkSparse, len(blk), len(dst)-start)
	return dst
}

func (ps *planeScratch) appendStored(dst, blk []byte) []byte {
	ps.stats.add(blkStored, len(blk), len(blk)+1)
	dst = append(dst, blkStored)
	return append(dst, blk...)
}

func (ps *planeScratch) huff(blk []byte, m int) ([]byte, error) {
	s := &ps.huffEnc
	s.Reuse = huff0.ReusePolicyNone
	s.Out = ps.huffOut[:0]
	var out []byte
	var err error
	if m == blkHuff4 {
		out, _, err = huff0.Compress4X(blk, s)
	} else {
		out, _, err = huff0.Compress1X(blk, s)
	}
	if cap(s.Out) > cap(ps.huffOut) {
		ps.huffOut = s.Out[:0]
	}
	return out, err
}

var errBlockLen = errors.New("block length")

// decodeBlock reads one record from src into blk (which it fills exactly)
// and returns the rest of src.
func (ps *planeScratch) decodeBlock(blk, src []byte, depth int, zstdInto func(out, src []byte) error) ([]byte, error) {
	if len(src) < 1 {
		return nil, fmt.Errorf("%w: plane block missing", ErrCorrupt)
	}
	m := src[0]
	src = src[1:]
	switch m {
	case blkStored:
		if len(src) < len(blk) {
			return nil, fmt.Errorf("%w: stored block truncated", ErrCorrupt)
		}
		copy(blk, src)
		return src[len(blk):], nil
	case blkRLE:
		if len(src) < 1 {
			return nil, fmt.Errorf("%w: rle block truncated", ErrCorrupt)
		}
		v := src[0]
		for i := range blk {
			blk[i] = v
		}
		return src[1:], nil
	case blkSparse:
		return ps.decodeSparse(blk, src, depth, zstdInto)
	case blkHuff4, blkHuff1, blkFSE, blkZstd:
	default:
		return nil, fmt.Errorf("%w: plane block method %d", ErrCorrupt, m)
	}
	clen, k := binary.Uvarint(src)
	if k <= 0 || clen > uint64(len(src)-k) {
		return nil, fmt.Errorf("%w: plane block length", ErrCorrupt)
	}
	data := src[k : k+int(clen)]
	rest := src[k+int(clen):]
	var err error
	switch m {
	case blkHuff4, blkHuff1:
		err = ps.unhuff(blk, data, m == blkHuff4)
	case blkFSE:
		err = ps.unfse(blk, data)
	case blkZstd:
		err = zstdInto(blk, data)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s block: %v", ErrCorrupt, blkNames[m], err)
	}
	return rest, nil
}

func (ps *planeScratch) unhuff(blk, data []byte, four bool) error {
	s, rest, err := huff0.ReadTable(data, &ps.huffDec)
	if err != nil {
		return err
	}
	d := s.Decoder()
	var out []byte
	if four {
		out, err = d.Decompress4X(blk[:0:len(blk)], rest)
	} else {
		out, err = d.Decompress1X(blk[:0:len(blk)], rest)
	}
	if err != nil {
		return err
	}
	return fill(blk, out)
}

func (ps *planeScratch) unfse(blk, data []byte) error {
	ps.fse.DecompressLimit = len(blk)
	ps.fse.Out = ps.fseOut[:0]
	out, err := fse.Decompress(data, &ps.fse)
	ps.fseOut = ps.fse.Out
	if err != nil {
		return err
	}
	return fill(blk, out)
}

// fill checks a decoder produced exactly len(blk) bytes and puts them there.
func fill(blk, out []byte) error {
	if len(out) != len(blk) {
		return fmt.Errorf("%w: got %d, want %d", errBlockLen, len(out), len(blk))
	}
	if len(out) > 0 && &out[0] != &blk[0] {
		copy(blk, out)
	}
	return nil
}

func (ps *planeScratch) decodeSparse(blk, src []byte, depth int, zstdInto func(out, src []byte) error) ([]byte, error) {
	if depth >= 2 || len(src) < 1 {
		return nil, fmt.Errorf("%w: sparse block nested %d deep or truncated", ErrCorrupt, depth)
	}
	m := src[0]
	sc := &ps.sparse[depth]
	sc.bitmap = grow(sc.bitmap, (len(blk)+7)/8)
	src, err := ps.decodeBlock(sc.bitmap, src[1:], depth+1, zstdInto)
	if err != nil {
		return nil, fmt.Errorf("sparse bitmap: %w", err)
	}
	cnt := popcount(sc.bitmap)
	if cnt > len(blk) {
		return nil, fmt.Errorf("%w: sparse bitmap marks %d of %d bytes", ErrCorrupt, cnt, len(blk))
	}
	sc.vals = grow(sc.vals, cnt)
	if src, err = ps.decodeBlock(sc.vals, src, depth+1, zstdInto); err != nil {
		return nil, fmt.Errorf("sparse values: %w", err)
	}
	return src, joinSparse(blk, m, sc.bitmap, sc.vals)
}

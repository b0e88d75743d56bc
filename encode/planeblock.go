package encode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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
	numBlk
)

var blkNames = [numBlk]string{"stored", "rle", "huff4", "huff1", "fse", "zstd"}

// blockStats counts, per method, how many blocks and bytes the encoder chose;
// the ratio report prints it so the choice heuristics can be checked.
type blockStats struct {
	Blocks [numBlk]int
	In     [numBlk]int
	Out    [numBlk]int
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

// appendBlock codes one block with the cheapest method the estimates allow.
func (ps *planeScratch) appendBlock(dst, blk []byte) []byte {
	var h [256]uint32
	histogram(blk, &h)
	maxc := uint32(0)
	for _, c := range h {
		maxc = max(maxc, c)
	}
	n := len(blk)
	if int(maxc) == n {
		ps.stats.add(blkRLE, n, 2)
		return append(dst, blkRLE, blk[0])
	}
	est := entropyBytes(&h, n)
	// huff0 pays at least ~0.03 bit/symbol over entropy plus its table; a
	// block that cannot save 2% is stored without trying.
	if est > 0.98*float64(n)-64 {
		return ps.appendStored(dst, blk)
	}
	best, bestM := []byte(nil), blkStored
	try := func(m int, out []byte, err error) {
		if err == nil && len(out) < n && (best == nil || len(out) < len(best)) {
			best, bestM = out, m
		}
	}
	huffM := blkHuff4
	if n < 4096 {
		huffM = blkHuff1
	}
	out, err := ps.huff(blk, huffM)
	try(huffM, out, err)
	// Huffman spends at least one bit per symbol; when one value dominates,
	// FSE's fractional bits win. Only then is it worth the slower decoder.
	if float64(maxc) > 0.55*float64(n) || (best != nil && float64(len(best)) > est*1.08+64) {
		ps.fse.Out = ps.fseOut[:0]
		out, err := fse.Compress(blk, &ps.fse)
		ps.fseOut = ps.fse.Out
		try(blkFSE, out, err)
	}
	if ps.tryZstd != nil {
		out, err := ps.tryZstd(blk)
		try(blkZstd, out, err)
	}
	if best == nil {
		return ps.appendStored(dst, blk)
	}
	start := len(dst)
	dst = append(dst, byte(bestM))
	dst = binary.AppendUvarint(dst, uint64(len(best)))
	dst = append(dst, best...)
	ps.stats.add(bestM, n, len(dst)-start)
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
func (ps *planeScratch) decodeBlock(blk, src []byte, zstdInto func(out, src []byte) error) ([]byte, error) {
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

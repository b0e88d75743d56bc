package encode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
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
//	blkSparse: dominant byte, counts, gaps record, values record (sparse.go)
//
// The block length is implied by the plane length, so a decoder always
// knows how many bytes a record must produce.
const planeBlock = 1 << 16

// maxSparseDepth is how deep sparse records nest: the gaps and values of a
// sparse block may be sparse themselves (chunk format 3), their own parts
// not. A sparse high plane's gaps are mostly one value (clustered changes,
// or the escapes of a very sparse plane), which only FSE coded well: at a
// third of huff0's speed and a table per record, a fifth of a cold read's
// CPU on a real training. Nested, they expand by fill and stores, and code
// as small (docs/CODECS.md, "Nested sparse records").
const maxSparseDepth = 1

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
	Nested int // sparse records inside sparse records
}

func (s *blockStats) String() string {
	var sb strings.Builder
	for m := range s.Blocks {
		if s.Blocks[m] > 0 {
			fmt.Fprintf(&sb, "    %-7s %6d blocks %11d -> %11d bytes (%.3f)\n", blkNames[m], s.Blocks[m], s.In[m], s.Out[m], float64(s.Out[m])/float64(s.In[m]))
		}
	}
	if s.Nested > 0 {
		fmt.Fprintf(&sb, "    (%d of the sparse blocks are parts of sparse blocks)\n", s.Nested)
	}
	return sb.String()
}

func (s *blockStats) add(m, in, out int) {
	s.Blocks[m]++
	s.In[m] += in
	s.Out[m] += out
}

// fseBias: FSE decodes at about a third of huff0's speed, so it is chosen
// only when its estimate beats the best alternative by this factor and by
// at least 1/fseMinGain of the block: on the training series FSE otherwise
// wins on nearly constant planes, where it saves a few dozen bytes of a
// 64 KiB block and costs a fifth of the decode time (docs/CODECS.md).
const (
	fseBias    = 0.90
	fseMinGain = 32
)

// appendBlock codes one block with the method the estimates favour.
// depth is how many sparse records the block lies inside; at
// maxSparseDepth its parts are not made sparse again.
func (ps *planeScratch) appendBlock(dst, blk []byte, depth int) []byte {
	bm := &ps.bm
	bm.analyse(blk)
	n := len(blk)
	if bm.constant(blk) {
		ps.stats.add(blkRLE, n, 2)
		return append(dst, blkRLE, blk[0])
	}
	huff, fseEst, sparse := bm.estHuff(), bm.estFSE(), float64(n)
	if depth <= maxSparseDepth && bm.pmax() > 0.5 && n >= 64 {
		sparse = bm.estSparse()
	}
	best := min(huff, sparse)
	method := blkHuff4
	switch {
	case fseEst < fseBias*best && best-fseEst > float64(n)/fseMinGain:
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
	// Order-0 coders pay for every byte of a repeated run; zstd's matches
	// nearly do not. Where the block repeats itself (and is not sparse,
	// where the gaps already cover the runs), zstd is tried first and kept
	// outright when it beats the chosen coder's estimate, else compared
	// with that coder's real output.
	var z []byte
	if n >= 4096 && method != blkSparse && !ps.noZstd {
		if r := repeatShare(blk); r >= zstdRepeat && r < 0.5 {
			est := float64(n)
			switch method {
			case blkHuff4, blkHuff1:
				est = huff
			case blkFSE:
				est = fseEst
			}
			if zz, err := ps.zstdBlock(blk); err == nil {
				z = zz
				if float64(len(z)) < 0.97*est {
					return ps.appendZstd(dst, n, z)
				}
			}
		}
	}
	start, saved := len(dst), ps.stats
	if method == blkSparse {
		dst = ps.appendSparse(dst, blk, bm.maxSym, depth)
	} else {
		dst = ps.appendCoded(dst, blk, method)
	}
	if z != nil && len(z)+4 < len(dst)-start {
		ps.stats = saved
		return ps.appendZstd(dst[:start], n, z)
	}
	return dst
}

func (ps *planeScratch) appendZstd(dst []byte, n int, z []byte) []byte {
	start := len(dst)
	dst = append(dst, blkZstd)
	dst = binary.AppendUvarint(dst, uint64(len(z)))
	dst = append(dst, z...)
	ps.stats.add(blkZstd, n, len(dst)-start)
	return dst
}

// zstdRepeat: the share of 8-byte words equal to their predecessor above
// which zstd is tried (measured on the training series: see docs/CODECS.md).
const zstdRepeat = 0.01

// repeatShare is the share of the block's 8-byte words that equal the
// previous word: a cheap sign of runs that an LZ coder would exploit. It
// runs on every coded block of every save, so it compares four words per
// step (half the time of one per step).
func repeatShare(blk []byte) float64 {
	words := len(blk) / 8
	if words < 2 {
		return 0
	}
	b := blk[:words*8]
	prev := binary.LittleEndian.Uint64(b)
	b = b[8:]
	same := 0
	for len(b) >= 32 {
		w0 := binary.LittleEndian.Uint64(b[0:8])
		w1 := binary.LittleEndian.Uint64(b[8:16])
		w2 := binary.LittleEndian.Uint64(b[16:24])
		w3 := binary.LittleEndian.Uint64(b[24:32])
		if w0 == prev {
			same++
		}
		if w1 == w0 {
			same++
		}
		if w2 == w1 {
			same++
		}
		if w3 == w2 {
			same++
		}
		prev = w3
		b = b[32:]
	}
	for ; len(b) >= 8; b = b[8:] {
		w := binary.LittleEndian.Uint64(b)
		if w == prev {
			same++
		}
		prev = w
	}
	return float64(same) / float64(words-1)
}

func (ps *planeScratch) zstdBlock(blk []byte) ([]byte, error) {
	if ps.zenc == nil {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false),
			zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(planeBlock))
		if err != nil {
			return nil, err
		}
		ps.zenc = enc
	}
	ps.zout = ps.zenc.EncodeAll(blk, ps.zout[:0])
	return ps.zout, nil
}

// appendCoded writes a stored, huff0 or FSE record.
func (ps *planeScratch) appendCoded(dst, blk []byte, method int) []byte {
	n := len(blk)
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

// appendSparse writes a sparse record.
func (ps *planeScratch) appendSparse(dst, blk []byte, m byte, depth int) []byte {
	sc := &ps.sparse[depth]
	sc.gaps, sc.vals = splitSparse(blk, m, sc.gaps[:0], sc.vals[:0])
	start := len(dst)
	dst = append(dst, blkSparse, m)
	dst = binary.AppendUvarint(dst, uint64(len(sc.gaps)))
	dst = binary.AppendUvarint(dst, uint64(len(sc.vals)))
	dst = ps.appendBlock(dst, sc.gaps, depth+1)
	dst = ps.appendBlock(dst, sc.vals, depth+1)
	ps.stats.add(blkSparse, len(blk), len(dst)-start)
	if depth > 0 {
		ps.stats.Nested++
	}
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
		fillByte(blk, src[0])
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

// fillByte sets every byte of b to v. A run-length block fills 64 KiB per
// record, a byte at a time it was 7% of a cold read's CPU: clear and
// doubling copies move whole vectors.
func fillByte(b []byte, v byte) {
	if v == 0 {
		clear(b)
		return
	}
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
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
	if depth > maxSparseDepth || len(src) < 1 {
		return nil, fmt.Errorf("%w: sparse block nested too deep, or truncated", ErrCorrupt)
	}
	m := src[0]
	src = src[1:]
	ng, k1 := binary.Uvarint(src)
	if k1 <= 0 {
		return nil, fmt.Errorf("%w: sparse gap count", ErrCorrupt)
	}
	nv, k2 := binary.Uvarint(src[k1:])
	// Every value needs a gap byte, and escapes cover 255 bytes each.
	if k2 <= 0 || nv > uint64(len(blk)) || ng < nv || ng-nv > uint64(len(blk)/gapEscape) {
		return nil, fmt.Errorf("%w: sparse counts %d/%d for %d bytes", ErrCorrupt, ng, nv, len(blk))
	}
	src = src[k1+k2:]
	sc := &ps.sparse[depth]
	sc.gaps = grow(sc.gaps, int(ng))
	sc.vals = grow(sc.vals, int(nv))
	var err error
	if src, err = ps.decodeBlock(sc.gaps, src, depth+1, zstdInto); err != nil {
		return nil, fmt.Errorf("sparse gaps: %w", err)
	}
	if src, err = ps.decodeBlock(sc.vals, src, depth+1, zstdInto); err != nil {
		return nil, fmt.Errorf("sparse values: %w", err)
	}
	return src, joinSparse(blk, m, sc.gaps, sc.vals)
}

package encode

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// The planes codec. Payload:
//
//	mode   1 byte: modeBase, modeXOR, modeSUB, or modeSame
//	shift  1 byte: t, the trailing zero bits dropped (not for modeSame)
//	planes w planes of n = len/w bytes, low byte first, each a sequence of
//	       block records (planeblock.go)
//	tail   the len%w plain bytes after the last element (not for modeSame)
//
// modeSame (the chunk equals its reference) has no other bytes. The
// transforms are in transform*.go, the block records in planeblock.go.

// planeScratch is the planes codec's part of a Coder: buffers and entropy
// coder state reused from chunk to chunk.
type planeScratch struct {
	buf     []byte
	sample  []byte
	huffEnc huff0.Scratch
	huffDec huff0.Scratch
	fse     fse.Scratch
	huffOut []byte
	fseOut  []byte
	stats   blockStats
	zenc    *zstd.Encoder // SpeedFastest, for plane blocks with runs
	zout    []byte
	bm      blockModel
	sparse  struct{ gaps, vals []byte }
	// onBlock, when set, sees every plane block before it is coded
	// (measurement only).
	onBlock func(plane int, blk []byte)
	// noZstd disables the zstd trial (measurement only).
	noZstd bool
	// force, when not nil, overrides the delta mode choice (measurement only).
	force *planeMode
}

func (cd *Coder) encodePlanes(dst []byte, dt DType, plain, ref []byte) ([]byte, bool, error) {
	ps := &cd.pl
	w := dt.Width()
	n := len(plain) / w
	if ref != nil && bytes.Equal(plain, ref) {
		return append(dst, byte(modeSame)), true, nil
	}
	mode, t := modeBase, uint(0)
	if n > 0 {
		mode, t = ps.chooseMode(dt, plain, ref, n)
	}
	if ps.force != nil && ref != nil {
		mode = *ps.force
	}
	dst = append(dst, byte(mode), byte(t))
	ps.buf = grow(ps.buf, n*w)
	splitAny(ps.buf, plain, ref, n, w, mode, t)
	for j := 0; j < w; j++ {
		plane := ps.buf[j*n : (j+1)*n]
		for off := 0; off < n; off += planeBlock {
			if ps.onBlock != nil {
				ps.onBlock(j, plane[off:min(off+planeBlock, n)])
			}
			dst = ps.appendBlock(dst, plane[off:min(off+planeBlock, n)], 0)
		}
	}
	dst = append(dst, plain[n*w:]...)
	return dst, mode != modeBase, nil
}

func (cd *Coder) decodePlanes(out []byte, dt DType, payload, ref []byte) error {
	ps := &cd.pl
	w := dt.Width()
	n := len(out) / w
	if len(payload) < 1 {
		return fmt.Errorf("%w: planes payload empty", ErrCorrupt)
	}
	mode := planeMode(payload[0])
	if mode == modeSame {
		if ref == nil || len(payload) != 1 {
			return fmt.Errorf("%w: bad unchanged-chunk record", ErrCorrupt)
		}
		copy(out, ref)
		return nil
	}
	if mode > modeSame || (mode == modeBase) != (ref == nil) || len(payload) < 2 {
		return fmt.Errorf("%w: planes mode %d (delta chunk: %t)", ErrCorrupt, mode, ref != nil)
	}
	t := uint(payload[1])
	if t >= uint(8*w) || (w == 1 && t != 0) {
		return fmt.Errorf("%w: planes shift %d", ErrCorrupt, t)
	}
	src := payload[2:]
	ps.buf = grow(ps.buf, n*w)
	var err error
	for j := 0; j < w; j++ {
		plane := ps.buf[j*n : (j+1)*n]
		for off := 0; off < n; off += planeBlock {
			src, err = ps.decodeBlock(plane[off:min(off+planeBlock, n)], src, 0, cd.zstdInto)
			if err != nil {
				return fmt.Errorf("plane %d block %d: %w", j, off/planeBlock, err)
			}
		}
	}
	if len(src) != len(out)-n*w {
		return fmt.Errorf("%w: %d bytes after the planes, want %d", ErrCorrupt, len(src), len(out)-n*w)
	}
	joinAny(out, ps.buf, ref, n, w, mode, t)
	copy(out[n*w:], src)
	return nil
}

package encode

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// The general-purpose codecs: zstd and gzip code the plain bytes of a
// baseline and the XOR of plain and reference of a delta (gzip on the XOR is
// the paper's "GZIP+delta"); rle4gzip gzips rle4's output.

// xorInto sets dst[i] = a[i] ^ b[i]; the slices have equal length.
func xorInto(dst, a, b []byte) {
	n := len(a)
	dst, b = dst[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		x := le64(a[i:]) ^ le64(b[i:])
		putLE64(dst[i:], x)
	}
	for ; i < n; i++ {
		dst[i] = a[i] ^ b[i]
	}
}

func (c *Coder) zstdEncoder() (*zstd.Encoder, error) {
	if c.zenc == nil {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false),
			zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		c.zenc = enc
	}
	return c.zenc, nil
}

func (c *Coder) zstdDecoder() (*zstd.Decoder, error) {
	if c.zdec == nil {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxPlain))
		if err != nil {
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		c.zdec = dec
	}
	return c.zdec, nil
}

// zstdInto decodes src into out, which it must fill exactly.
func (c *Coder) zstdInto(out, src []byte) error {
	dec, err := c.zstdDecoder()
	if err != nil {
		return err
	}
	got, err := dec.DecodeAll(src, out[:0:len(out)])
	if err != nil {
		return fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	if len(got) != len(out) {
		return fmt.Errorf("%w: zstd gave %d bytes, want %d", ErrCorrupt, len(got), len(out))
	}
	if len(out) > 0 && &got[0] != &out[0] {
		copy(out, got)
	}
	return nil
}

// gzipTo appends one gzip member of src to dst. It is the standard
// library's writer at the default level (zlib's level 6, what gzip -c
// does), the gzip the paper's GZIP methods mean: klauspost's default level,
// tuned for speed, stores about 97.7% of a float32 checkpoint where gzip -c
// stores 91.3%, which made the GZIP rows of replay --compare look like no
// compression at all. The reader stays klauspost's (faster; any member
// decodes), so chunks written before decode as they did.
func (c *Coder) gzipTo(dst, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if c.gzw == nil {
		c.gzw = stdgzip.NewWriter(buf)
	} else {
		c.gzw.Reset(buf)
	}
	if _, err := c.gzw.Write(src); err != nil {
		return dst, fmt.Errorf("gzip: %w", err)
	}
	if err := c.gzw.Close(); err != nil {
		return dst, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// gunzipReset points the reusable gzip reader at one member in src.
func (c *Coder) gunzipReset(src []byte) (*bytes.Reader, error) {
	r := bytes.NewReader(src)
	var err error
	if c.gzr == nil {
		c.gzr, err = gzip.NewReader(r)
	} else {
		err = c.gzr.Reset(r)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: gzip header: %v", ErrCorrupt, err)
	}
	c.gzr.Multistream(false)
	return r, nil
}

// gunzipInto decodes src, which must hold exactly len(out) bytes.
func (c *Coder) gunzipInto(out, src []byte) error {
	r, err := c.gunzipReset(src)
	if err != nil {
		return err
	}
	if _, err := io.ReadFull(c.gzr, out); err != nil {
		return fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	var one [1]byte
	if n, err := c.gzr.Read(one[:]); n != 0 || err != io.EOF {
		return fmt.Errorf("%w: gzip stream longer than the chunk", ErrCorrupt)
	}
	if r.Len() != 0 {
		return fmt.Errorf("%w: bytes after the gzip stream", ErrCorrupt)
	}
	return nil
}

// gunzipBounded decodes src into a scratch buffer of at most limit bytes.
func (c *Coder) gunzipBounded(src []byte, limit int) ([]byte, error) {
	r, err := c.gunzipReset(src)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(c.tmp[:0])
	n, err := buf.ReadFrom(io.LimitReader(c.gzr, int64(limit)+1))
	c.tmp = buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: gzip stream longer than its bound", ErrCorrupt)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: bytes after the gzip stream", ErrCorrupt)
	}
	return c.tmp[:n], nil
}

// rleBound is the most bytes rle4/dynrle can produce for a chunk: the bound
// the rle4gzip decoder allows the inner stream.
func rleBound(dt DType, plainLen int) int {
	l := layoutOf(dt)
	n := plainLen / l.w
	tail := plainLen - n*l.w
	perDelta := l.bits + 6 // 6 >= any heading width, incl. rle4's 4
	perBase := huffMaxLen + l.restBits()
	per := max(perDelta, perBase)
	return 1 + 2048 + (n*int(per)+7)/8 + tail
}

package encode

import "encoding/binary"

// bitWriter packs values LSB-first into bytes. It is the bit layer of the
// dynrle/rle4 codecs and of the canonical Huffman coder.
type bitWriter struct {
	out []byte
	acc uint64
	n   uint // valid bits in acc, < 32 between calls
}

// write appends the low nb bits of v (nb <= 32; v must have no higher bits).
func (w *bitWriter) write(v uint64, nb uint) {
	w.acc |= v << w.n
	w.n += nb
	if w.n >= 32 {
		w.out = binary.LittleEndian.AppendUint32(w.out, uint32(w.acc))
		w.acc >>= 32
		w.n -= 32
	}
}

// write64 appends the low nb bits of v for nb up to 64.
func (w *bitWriter) write64(v uint64, nb uint) {
	if nb > 32 {
		w.write(v&0xFFFFFFFF, 32)
		v >>= 32
		nb -= 32
	}
	w.write(v, nb)
}

// finish flushes the partial byte(s) and returns the buffer.
func (w *bitWriter) finish() []byte {
	for w.n > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		if w.n < 8 {
			w.n = 0
		} else {
			w.n -= 8
		}
	}
	return w.out
}

// bitReader reads what bitWriter wrote. Reading past the end yields zero
// bits; finished then reports false, which callers turn into ErrCorrupt: a
// corrupt stream costs a wrong result and an error, never a panic.
type bitReader struct {
	in       []byte
	pos      int
	acc      uint64
	n        uint // buffered bits (real or, past the end, zero padding)
	consumed uint64
}

func newBitReader(in []byte) bitReader { return bitReader{in: in} }

func (r *bitReader) refill() {
	if r.pos+8 <= len(r.in) {
		v := binary.LittleEndian.Uint64(r.in[r.pos:])
		r.acc |= v << r.n
		k := (63 - r.n) >> 3
		r.pos += int(k)
		r.n += k << 3
		return
	}
	for r.n <= 56 && r.pos < len(r.in) {
		r.acc |= uint64(r.in[r.pos]) << r.n
		r.pos++
		r.n += 8
	}
	if r.pos == len(r.in) {
		r.n = 64 // the rest are zero padding; consumed tells them apart
	}
}

// read returns the next nb bits, nb <= 32.
func (r *bitReader) read(nb uint) uint64 {
	if r.n < nb {
		r.refill()
	}
	v := r.acc & (1<<nb - 1)
	r.acc >>= nb
	r.n -= nb
	r.consumed += uint64(nb)
	return v
}

// read64 returns the next nb bits, nb <= 64.
func (r *bitReader) read64(nb uint) uint64 {
	if nb > 32 {
		lo := r.read(32)
		return lo | r.read(nb-32)<<32
	}
	return r.read(nb)
}

// peek returns the next nb (<= 32) bits without consuming them.
func (r *bitReader) peek(nb uint) uint64 {
	if r.n < nb {
		r.refill()
	}
	return r.acc & (1<<nb - 1)
}

func (r *bitReader) skip(nb uint) {
	r.acc >>= nb
	r.n -= nb
	r.consumed += uint64(nb)
}

// overrun reports whether more bits were consumed than the input holds.
func (r *bitReader) overrun() bool { return r.consumed > uint64(len(r.in))*8 }

// finished reports whether the stream was consumed exactly: no over-read,
// and what is left is fewer than 8 padding bits, all zero.
func (r *bitReader) finished() bool {
	total := uint64(len(r.in)) * 8
	if r.consumed > total || total-r.consumed >= 8 {
		return false
	}
	if r.pos < len(r.in) {
		return false
	}
	return r.acc == 0
}

package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrCorruptRecord reports a stored record that cannot be decoded: a short
// buffer, an unknown record version or a length that runs past the end.
var ErrCorruptRecord = errors.New("corrupt metadata record")

// recordWriter appends the fields of one record. Every record starts with a
// version byte so that the format can grow without a migration.
type recordWriter struct{ b []byte }

func (w *recordWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *recordWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *recordWriter) u8(v uint8)       { w.b = append(w.b, v) }
func (w *recordWriter) u32(v uint32)     { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *recordWriter) f64(v float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v))
}
func (w *recordWriter) bool(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}
func (w *recordWriter) bytes(v []byte) { w.uvarint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *recordWriter) str(v string)   { w.uvarint(uint64(len(v))); w.b = append(w.b, v...) }

// recordReader decodes fields in the order they were written. The first
// error sticks, so a decoder reads every field and checks err once.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorruptRecord, what)
	}
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("field runs past the end")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *recordReader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *recordReader) f64() float64 {
	if v := r.take(8); v != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(v))
	}
	return 0
}

func (r *recordReader) bool() bool { return r.u8() != 0 }

func (r *recordReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("byte field longer than record")
		return nil
	}
	return append([]byte(nil), r.take(int(n))...)
}

func (r *recordReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string field longer than record")
		return ""
	}
	return string(r.take(int(n)))
}

// expectVersion checks the leading version byte of a record.
func (r *recordReader) expectVersion(kind string, want uint8) {
	if v := r.u8(); r.err == nil && v != want {
		r.err = fmt.Errorf("%w: %s record version %d, want %d", ErrCorruptRecord, kind, v, want)
	}
}

// u64key encodes a bbolt key that sorts numerically.
func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func keyU64(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

package encode

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Lossy is a scheme an opt-in archive tier applies to a tensor's values
// before coding: the values change, the dtype and the file format do not,
// so every loader reads a tiered file unchanged. Nothing in ckptfs applies
// one unless a user asks for it (`ckptfs repack --lossy`).
type Lossy struct {
	// Name is what the store records with each tiered version
	// (user.ckptfs.fidelity).
	Name string
	// Bound says what the scheme keeps, in words a report can print.
	Bound string
	// apply transforms the little-endian float32 values of src into dst
	// (same length; dst may be src).
	apply func(dst, src []byte)
}

// LossyBF16 rounds every float32 value to the nearest bfloat16 (ties to
// even) and keeps it as float32: the high 16 bits of each value, which the
// planes codec stores and the low 16, now zero, cost nothing. FlashNeuron
// stores fp32 tensors as fp16; bfloat16 keeps float32's range, so the bound
// is relative for every normal value (docs/ARCHIVE.md measures both).
var LossyBF16 = Lossy{
	Name: "bf16",
	Bound: "float32 values rounded to the nearest bfloat16: relative error at most 2^-8 (magnitudes " +
		"past bfloat16's largest clamp to it), absolute at most 2^-134 among subnormals; NaN and " +
		"infinities kept",
	apply: roundBF16Bytes,
}

// LossyM4 rounds every float32 value to the nearest value with 4 mantissa
// bits (ties to even), kept as float32 with float32's range: coarser than
// bfloat16's 7 bits, for tensors that tolerate it (optimizer moments,
// docs/ARCHIVE.md: 0.24 of plain as deltas for Adam's exp_avg against 0.32
// at bfloat16, 0.17 against 0.29 for exp_avg_sq).
var LossyM4 = Lossy{
	Name: "m4",
	Bound: "float32 values rounded to the nearest value with 4 mantissa bits: relative error at most " +
		"2^-5 (magnitudes past the largest such value clamp to it), absolute at most 2^-131 among " +
		"subnormals; NaN and infinities kept",
	apply: func(dst, src []byte) { roundMantissaBytes(dst, src, 4) },
}

// LossyByName is the scheme of a name, for flags and records.
func LossyByName(name string) (Lossy, error) {
	switch name {
	case LossyBF16.Name:
		return LossyBF16, nil
	case LossyM4.Name:
		return LossyM4, nil
	}
	return Lossy{}, fmt.Errorf("unknown lossy scheme %q (known: bf16, m4)", name)
}

// Apply transforms the float32 values of src into dst, which must be as
// long; dst may be src. Only float32 tensors are tiered: a caller passes
// nothing else.
func (l Lossy) Apply(dst, src []byte) {
	if len(dst) != len(src) || len(src)%4 != 0 {
		panic(fmt.Sprintf("lossy %s: %d bytes into %d", l.Name, len(src), len(dst)))
	}
	l.apply(dst, src)
}

// IsZero reports whether l is no scheme (exact).
func (l Lossy) IsZero() bool { return l.apply == nil }

// RoundBF16 rounds x to the nearest bfloat16 value, as float32: ties to
// even, NaN and infinities kept, and magnitudes that would round past
// bfloat16's largest finite value clamped to it (never to infinity).
func RoundBF16(x float32) float32 {
	return math.Float32frombits(roundBF16Bits(math.Float32bits(x)))
}

func roundBF16Bits(u uint32) uint32 {
	if u&0x7f800000 == 0x7f800000 {
		if u&0x007fffff != 0 {
			return (u | 0x00400000) &^ 0xffff // NaN: quiet, and still a NaN
		}
		return u // ±Inf
	}
	r := u + 0x7fff + (u>>16)&1
	if r&0x7f800000 == 0x7f800000 {
		return u&0x80000000 | 0x7f7f0000 // would become Inf: clamp
	}
	return r &^ 0xffff
}

func roundBF16Bytes(dst, src []byte) {
	for i := 0; i+4 <= len(src); i += 4 {
		binary.LittleEndian.PutUint32(dst[i:], roundBF16Bits(binary.LittleEndian.Uint32(src[i:])))
	}
}

// RoundMantissa rounds x to the nearest float32 value with k (1 to 22)
// mantissa bits, ties to even, as RoundBF16 does for k = 7.
func RoundMantissa(x float32, k uint) float32 {
	return math.Float32frombits(roundMantissaBits(math.Float32bits(x), k))
}

func roundMantissaBits(u uint32, k uint) uint32 {
	drop := 23 - k
	mask := uint32(1)<<drop - 1
	if u&0x7f800000 == 0x7f800000 {
		if u&0x007fffff != 0 {
			return (u | 0x00400000) &^ mask // NaN: quiet, and still a NaN
		}
		return u // ±Inf
	}
	r := u + mask>>1 + (u>>drop)&1
	if r&0x7f800000 == 0x7f800000 {
		return (u | 0x7f7fffff) &^ mask // would become Inf: clamp
	}
	return r &^ mask
}

func roundMantissaBytes(dst, src []byte, k uint) {
	for i := 0; i+4 <= len(src); i += 4 {
		binary.LittleEndian.PutUint32(dst[i:], roundMantissaBits(binary.LittleEndian.Uint32(src[i:]), k))
	}
}

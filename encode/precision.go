package encode

import (
	"encoding/binary"
	"math"
)

// Reduced precisions of float32 values kept as float32, as the precision
// views read them (chain/view.go): TruncateFloat32 (bfloat16 toward zero),
// and the two below, rounded to nearest.

// RoundFP16 rounds x to the nearest float16 value (IEEE binary16, ties to
// even) and returns it as float32: what torch's x.half().float() gives.
// Magnitudes that round past float16's largest finite value (65504)
// become infinities, as in that conversion; below its normal range the
// values are multiples of 2^-24, and those under 2^-25 become a signed
// zero; NaN stays a NaN.
func RoundFP16(x float32) float32 {
	return math.Float32frombits(roundFP16Bits(math.Float32bits(x)))
}

func roundFP16Bits(u uint32) uint32 {
	sign, a := u&0x80000000, u&0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: quiet, and still a NaN
		return (u | 0x00400000) &^ 0x1fff
	case a == 0x7f800000:
		return u
	case a >= 0x477ff000: // 65520 and past: a tie with 65536 goes even, to Inf
		return sign | 0x7f800000
	case a >= 0x38800000: // 2^-14 and past: normal, 10 mantissa bits
		return sign | (a+0x0fff+(a>>13)&1)&^0x1fff
	}
	// Subnormal in float16: a multiple of 2^-24, exact in float64.
	f := math.RoundToEven(float64(math.Float32frombits(a))*(1<<24)) / (1 << 24)
	return sign | math.Float32bits(float32(f))
}

// RoundFloat32FP16 rounds every float32 element of b (little-endian) in
// place with RoundFP16; the bytes after the last whole element stay.
func RoundFloat32FP16(b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], roundFP16Bits(binary.LittleEndian.Uint32(b[i:])))
	}
}

// RoundFloat32BF16 rounds every float32 element of b in place with
// RoundBF16; the bytes after the last whole element stay.
func RoundFloat32BF16(b []byte) {
	roundBF16Bytes(b[:len(b)&^3], b[:len(b)&^3])
}

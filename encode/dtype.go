// Package encode holds the pure codecs of ckptfs: float delta codecs, the
// generic codec for raw bytes, and (in encode/detect) the format detectors.
// Nothing here does I/O, so every codec is tested with two byte slices.
package encode

import "fmt"

// DType is the element type of a tensor range. Bytes means "not a float
// tensor we understand": such ranges are still coded losslessly, as bytes.
type DType uint8

const (
	Bytes DType = iota
	Float32
	Float16
	BFloat16
	Float64
)

// Width is the size of one element in bytes (1 for Bytes).
func (d DType) Width() int {
	switch d {
	case Float32:
		return 4
	case Float16, BFloat16:
		return 2
	case Float64:
		return 8
	default:
		return 1
	}
}

func (d DType) String() string {
	switch d {
	case Bytes:
		return "bytes"
	case Float32:
		return "float32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	case Float64:
		return "float64"
	default:
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
}

// ParseDType is the inverse of DType.String.
func ParseDType(s string) (DType, error) {
	for d := Bytes; d <= Float64; d++ {
		if d.String() == s {
			return d, nil
		}
	}
	return Bytes, fmt.Errorf("unknown dtype %q", s)
}

// Valid reports whether d is one of the defined dtypes.
func (d DType) Valid() bool { return d <= Float64 }

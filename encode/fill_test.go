package encode

import (
	"bytes"
	"testing"
)

func TestFillByte(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 255, 4096, 65535, 65536} {
		for _, v := range []byte{0, 1, 0x80, 0xff} {
			b := bytes.Repeat([]byte{0x5a}, n+2)
			fillByte(b[1:n+1], v)
			if b[0] != 0x5a || b[n+1] != 0x5a {
				t.Fatalf("n=%d v=%#x: wrote outside the slice", n, v)
			}
			if want := bytes.Repeat([]byte{v}, n); !bytes.Equal(b[1:n+1], want) {
				t.Fatalf("n=%d v=%#x: not filled", n, v)
			}
		}
	}
}

// BenchmarkFillByte: a run-length plane block of 64 KiB.
func BenchmarkFillByte(b *testing.B) {
	blk := make([]byte, planeBlock)
	b.SetBytes(planeBlock)
	for b.Loop() {
		fillByte(blk, 0x3f)
	}
}

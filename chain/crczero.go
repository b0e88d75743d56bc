package chain

import (
	"errors"
	"hash/crc32"
	"io"
	"os"

	"github.com/ckptfs/ckptfs/chain/staging"
)

// crc32 (Castagnoli) over runs of zeros without reading them: a hole of
// 64 GiB must cost nothing to commit, yet the file checksum covers it.
//
// Feeding a zero byte to a CRC register multiplies it by x^8 modulo the
// polynomial, so n zeros multiply it by x^(8n), which is computed by
// squaring in O(log n). Polynomials are in the reflected bit order that
// hash/crc32 uses: bit 31 is the coefficient of x^0.

const castagnoliReflected = 0x82f63b78

// x2n[k] is x^(2^k) modulo the polynomial, for k up to 2^66 (8 × 2^63).
var x2n = func() (t [67]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// mulModP multiplies a and b modulo the polynomial.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// crc32Zeros is crc32.Update(crc, castagnoli, make([]byte, n)).
func crc32Zeros(crc uint32, n int64) uint32 {
	r := ^crc
	for k := 3; n != 0; k, n = k+1, n>>1 { // 8n = n << 3
		if n&1 != 0 {
			r = mulModP(x2n[k], r)
		}
	}
	return ^r
}

// FileChecksum is the size and CRC-32C (Castagnoli) of f's content, as a
// commit records it (FileInfo.Checksum), reading only its data: the holes
// of a sparse staging file cost nothing, so that a 16 TiB sparse file is
// checked at once (fstests generic/308).
func FileChecksum(f *os.File) (int64, uint32, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	table := crc32.MakeTable(crc32.Castagnoli)
	var crc uint32
	buf := make([]byte, 1<<20)
	at := int64(0) // what the checksum covers so far
	err = staging.Extents(f, size, func(off, n int64) error {
		crc = crc32Zeros(crc, off-at)
		end := off + n
		for off < end {
			k, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			crc = crc32.Update(crc, table, buf[:k])
			off += int64(k)
			if err != nil {
				if errors.Is(err, io.EOF) && off >= end {
					break
				}
				return err
			}
		}
		at = end
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return size, crc32Zeros(crc, size-at), nil
}

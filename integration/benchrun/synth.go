package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// Synthetic checkpoints for the sizes no real training here can reach in
// minutes: a NumPy .npy float32 vector whose values look like trained
// weights (centred, about 0.05 wide) and drift by about 0.1% (relative)
// from one version to the next, as weights do between checkpoints. Values
// are a hash of (seed, index, version), so any version is made
// independently and the same call gives the same bytes.

const synthDrift = 1e-3

// synthHeader is the .npy (format 1.0) header of n float32 values.
func synthHeader(n int64) []byte {
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n)
	pad := (64 - (10+len(dict)+1)%64) % 64
	dict += strings.Repeat(" ", pad) + "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(h, dict...)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// synthFill writes values [first, first+len(dst)/4) of version v into dst.
func synthFill(dst []byte, seed uint64, first int64, v int) {
	for k := 0; k+4 <= len(dst); k += 4 {
		i := uint64(first) + uint64(k/4)
		h := splitmix(seed ^ i*0x2545f4914f6cdd1d)
		// The sum of two uniforms: a triangular bump around 0.
		a := float64(uint32(h)) / (1 << 32)
		c := float64(h>>32) / (1 << 32)
		w := (a + c - 1) * 0.05
		d := float64(int32(splitmix(h^uint64(v)*0x9e3779b97f4a7c15))) / (1 << 31)
		f := float32(w * (1 + synthDrift*d))
		binary.LittleEndian.PutUint32(dst[k:], math.Float32bits(f))
	}
}

// writeSynth writes version v of a synthetic checkpoint of about size bytes.
func writeSynth(w io.Writer, size int64, seed uint64, v int) error {
	n := (size - 128) / 4
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(synthHeader(n)); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := int64(0); i < n; {
		k := min(int64(len(buf)/4), n-i)
		synthFill(buf[:4*k], seed, i, v)
		if _, err := bw.Write(buf[:4*k]); err != nil {
			return err
		}
		i += k
	}
	return bw.Flush()
}

// synthBytes is version v of a synthetic checkpoint, in memory.
func synthBytes(size int64, seed uint64, v int) []byte {
	n := (size - 128) / 4
	h := synthHeader(n)
	b := make([]byte, int64(len(h))+4*n)
	copy(b, h)
	synthFill(b[len(h):], seed, 0, v)
	return b
}

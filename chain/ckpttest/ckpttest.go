// Package ckpttest makes small checkpoint files for tests: of the store,
// the filesystem and the commands (test code only).
package ckpttest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
)

// NpyFile is a NumPy .npy holding float32 values: a format the detectors
// recognise, so its data is labelled as one tensor.
func NpyFile(vals []float32) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", len(vals))
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	binary.Write(&b, binary.LittleEndian, vals)
	return b.Bytes()
}

// TrainingSeries returns n versions of float32 weights that drift like a
// training: each step adds small noise, so consecutive versions share most
// high bits.
func TrainingSeries(seed int64, elems, n int) [][]float32 {
	rng := rand.New(rand.NewSource(seed))
	w := make([]float32, elems)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	out := make([][]float32, 0, n)
	for v := 0; v < n; v++ {
		out = append(out, append([]float32(nil), w...))
		for i := range w {
			w[i] += float32(rng.NormFloat64() * 1e-4)
		}
	}
	return out
}

// Tensor is a named float32 tensor of a Safetensors file.
type Tensor struct {
	Name string
	Vals []float32
}

// SafetensorsFile is a safetensors file of float32 tensors, in the order
// given, with the header padded to 8 bytes as the writers pad it.
func SafetensorsFile(tensors []Tensor) []byte {
	var hdr bytes.Buffer
	hdr.WriteString("{")
	var off int
	for i, t := range tensors {
		if i > 0 {
			hdr.WriteString(",")
		}
		fmt.Fprintf(&hdr, "%q:{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%d,%d]}", t.Name, len(t.Vals), off, off+4*len(t.Vals))
		off += 4 * len(t.Vals)
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteString(" ")
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(hdr.Len()))
	b.Write(hdr.Bytes())
	for _, t := range tensors {
		binary.Write(&b, binary.LittleEndian, t.Vals)
	}
	return b.Bytes()
}

package analyze

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// weights are n float32 values of the spread of a layer's weights, none 0.
func weights(n int, seed int64) []float32 {
	r := rand.New(rand.NewSource(seed))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64()*0.02) + 1e-4
	}
	return out
}

// npyFile is v as a NumPy .npy file (format 1.0, little-endian float32).
func npyFile(v []float32) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", len(v))
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	out = append(out, header...)
	for _, f := range v {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	vals := weights(10_000, 1)
	flipped := make([]float32, len(vals))
	for i, v := range vals {
		flipped[i] = -v
	}
	write := func(name string, v []float32) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, npyFile(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, same, neg := write("a.npy", vals), write("b.npy", vals), write("c.npy", flipped)

	an, err := Compare(a, same)
	if err != nil {
		t.Fatal(err)
	}
	if an.Elements != int64(len(vals)) || len(an.Tensors) != 1 || an.Tensors[0].Identical != 1 {
		t.Fatalf("identical files: %+v", an)
	}
	for _, r := range an.SameHeadingBits {
		if r.Share != 1 {
			t.Fatalf("identical files: %d bits shared by %.3f", r.Bits, r.Share)
		}
	}
	if an.SameHeadingBits[0].Bits != 4 || an.SameHeadingBits[len(an.SameHeadingBits)-1].Bits != 12 {
		t.Fatalf("Table 1 rows %+v, want 4..12 bits", an.SameHeadingBits)
	}

	an, err = Compare(a, neg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range an.SameHeadingBits {
		if r.Share != 0 {
			t.Fatalf("sign-flipped values share their first %d bits in %.3f of cases", r.Bits, r.Share)
		}
	}
	if got := an.Tensors[0].MeanRelChange; got < 1.99 || got > 2.01 {
		t.Fatalf("mean relative change of x -> -x = %.3f, want 2", got)
	}
}

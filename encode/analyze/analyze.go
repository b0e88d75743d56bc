// Package analyze compares two checkpoints tensor by tensor (the paper's
// Table 1 and per-tensor change statistics). It reads files only; it never
// opens a store.
package analyze

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"

	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/encode/detect"
)

// Analysis compares two checkpoints tensor by tensor: the paper's Table 1
// (share of parameters whose leading bits agree) and per-tensor change
// statistics.
type Analysis struct {
	A        string `json:"a"`
	B        string `json:"b"`
	FormatA  string `json:"format_a"`
	FormatB  string `json:"format_b"`
	Elements int64  `json:"elements_compared"`
	// SameHeadingBits[i] is the share of compared elements whose first
	// SameHeadingBits[i].Bits bits (sign, exponent, high mantissa) agree.
	SameHeadingBits []HeadingShare  `json:"same_heading_bits"`
	Tensors         []TensorChanges `json:"tensors"`
	OnlyInA         int             `json:"tensors_only_in_a"`
	OnlyInB         int             `json:"tensors_only_in_b"`
}

// HeadingShare is one row of Table 1.
type HeadingShare struct {
	Bits  int     `json:"bits"`
	Share float64 `json:"share"`
}

// TensorChanges describes how one tensor changed from A to B.
type TensorChanges struct {
	// Name is the tensor's parameter name where the file gives one (a
	// safetensors header, a torch pickle's dict keys: "model.fc.weight",
	// "state.3.exp_avg"); Key is the detector's key (a torch storage:
	// "data/17"), KeyB B's key when it differs.
	Name           string  `json:"name,omitempty"`
	Key            string  `json:"key"`
	KeyB           string  `json:"key_b,omitempty"`
	DType          string  `json:"dtype"`
	Elements       int64   `json:"elements"`
	Identical      float64 `json:"identical_share"`
	MeanSameBits   float64 `json:"mean_same_heading_bits"`
	MeanRelChange  float64 `json:"mean_relative_change"` // mean |b-a|/|a| over finite, non-zero a
	MaxAbsChange   float64 `json:"max_abs_change"`
	sameHist       [65]int64
	relSum         float64
	relN           int64
	identicalCount int64
	sameBitsTotal  int64
}

type tensorRange struct {
	key, name   string
	off, length int64
	dt          encode.DType
}

// Compare compares the float tensors that checkpoints a and b have under
// the same name (or, where a file names none, the same key), dtype and
// length.
func Compare(a, b string) (*Analysis, error) {
	ta, fa, err := tensorRanges(a)
	if err != nil {
		return nil, err
	}
	tb, fb, err := tensorRanges(b)
	if err != nil {
		return nil, err
	}
	an := &Analysis{A: a, B: b, FormatA: fa, FormatB: fb}
	if named(ta) && named(tb) {
		ta, tb = byName(ta), byName(tb)
	}
	fileA, err := os.Open(a)
	if err != nil {
		return nil, err
	}
	defer fileA.Close()
	fileB, err := os.Open(b)
	if err != nil {
		return nil, err
	}
	defer fileB.Close()
	keys := make([]string, 0, len(ta))
	for k := range ta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var hist [65]int64
	width := 0
	for _, k := range keys {
		ra := ta[k]
		rb, ok := tb[k]
		if !ok || rb.dt != ra.dt || rb.length != ra.length {
			an.OnlyInA++
			continue
		}
		tc, err := compareTensor(fileA, fileB, ra, rb)
		if err != nil {
			return nil, err
		}
		an.Elements += tc.Elements
		for i, n := range tc.sameHist {
			hist[i] += n
		}
		width = max(width, ra.dt.Width()*8)
		an.Tensors = append(an.Tensors, *tc)
	}
	for k := range tb {
		if _, ok := ta[k]; !ok {
			an.OnlyInB++
		}
	}
	if an.Elements > 0 {
		for k := 4; k <= min(12, width); k++ {
			var n int64
			for same := k; same <= 64; same++ {
				n += hist[same]
			}
			an.SameHeadingBits = append(an.SameHeadingBits, HeadingShare{Bits: k, Share: float64(n) / float64(an.Elements)})
		}
	}
	return an, nil
}

// named reports whether every tensor has a name. Storage keys follow the
// order of saving, so a tensor added before others shifts them: names pair
// tensors as the user means, where both files name all of theirs.
func named(ts map[string]tensorRange) bool {
	for _, t := range ts {
		if t.name == "" {
			return false
		}
	}
	return len(ts) > 0
}

func byName(ts map[string]tensorRange) map[string]tensorRange {
	out := make(map[string]tensorRange, len(ts))
	for _, t := range ts {
		out[t.name] = t
	}
	return out
}

// tensorRanges runs the detector over a file and returns its float
// tensors by key, with their names where the file gives them.
func tensorRanges(path string) (map[string]tensorRange, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	det := detect.New(filepath.Base(path))
	byKey := map[string]*tensorRange{}
	buf := make([]byte, 1<<20)
	var spans []detect.Span
	for {
		n, rerr := f.Read(buf)
		spans = det.Label(spans[:0], buf[:n])
		for _, s := range spans {
			if s.Kind != detect.Tensor || s.DType == encode.Bytes {
				continue
			}
			r, ok := byKey[s.Key]
			if !ok {
				r = &tensorRange{key: s.Key, off: s.Offset, dt: s.DType}
				byKey[s.Key] = r
			}
			r.length += s.Length
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, "", fmt.Errorf("analyze %s: %w", path, rerr)
		}
	}
	format := det.Format()
	var names map[string]string
	switch format {
	case "torch-zip":
		names = torchStorageNames(path)
	case "safetensors":
		names = map[string]string{}
		for k := range byKey {
			names[k] = k // the header names each tensor
		}
	}
	out := map[string]tensorRange{}
	for k, r := range byKey {
		r.name = names[k]
		out[k] = *r
	}
	return out, format, nil
}

func compareTensor(fa, fb *os.File, ra, rb tensorRange) (*TensorChanges, error) {
	w := ra.dt.Width()
	tc := &TensorChanges{Name: ra.name, Key: ra.key, DType: ra.dt.String()}
	if rb.key != ra.key {
		tc.KeyB = rb.key
	}
	bufA, bufB := make([]byte, 1<<20), make([]byte, 1<<20)
	for done := int64(0); done < ra.length; {
		n := min(int64(len(bufA)), ra.length-done)
		n -= n % int64(w)
		if n == 0 {
			break
		}
		if _, err := fa.ReadAt(bufA[:n], ra.off+done); err != nil {
			return nil, err
		}
		if _, err := fb.ReadAt(bufB[:n], rb.off+done); err != nil {
			return nil, err
		}
		for i := int64(0); i < n; i += int64(w) {
			x, y := word(bufA[i:], w), word(bufB[i:], w)
			same := w * 8
			if d := x ^ y; d != 0 {
				same = bits.LeadingZeros64(d) - (64 - w*8)
			}
			tc.sameHist[same]++
			tc.sameBitsTotal += int64(same)
			if x == y {
				tc.identicalCount++
			}
			va, vb := value(x, ra.dt), value(y, ra.dt)
			if d := math.Abs(vb - va); !math.IsNaN(d) && !math.IsInf(d, 0) {
				tc.MaxAbsChange = math.Max(tc.MaxAbsChange, d)
				if va != 0 {
					tc.relSum += d / math.Abs(va)
					tc.relN++
				}
			}
			tc.Elements++
		}
		done += n
	}
	if tc.Elements > 0 {
		tc.Identical = float64(tc.identicalCount) / float64(tc.Elements)
		tc.MeanSameBits = float64(tc.sameBitsTotal) / float64(tc.Elements)
	}
	if tc.relN > 0 {
		tc.MeanRelChange = tc.relSum / float64(tc.relN)
	}
	return tc, nil
}

func word(b []byte, w int) uint64 {
	switch w {
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	default:
		return binary.LittleEndian.Uint64(b)
	}
}

func value(x uint64, dt encode.DType) float64 {
	switch dt {
	case encode.Float32:
		return float64(math.Float32frombits(uint32(x)))
	case encode.BFloat16:
		return float64(math.Float32frombits(uint32(x) << 16))
	case encode.Float16:
		return halfToFloat(uint16(x))
	default:
		return math.Float64frombits(x)
	}
}

func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * frac / 1024 * math.Pow(2, -14)
	case 31:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * (1 + frac/1024) * math.Pow(2, float64(exp-15))
}

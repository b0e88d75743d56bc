package encode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestLossyTierExperiment measures what the lossy schemes of an archive
// tier (issue 51: PAS's fixed point and byte-significance layout, Check-QZP's
// k-bit quantization, FlashNeuron's fp16) would store for each tensor role
// of the real series, against the lossless codec, and the error each keeps.
// It codes every checkpoint as a baseline and as a delta against the
// previous one, coded the same way (a tier's chain is of tiered versions).
// Figures with -v:
//
//	go test -run LossyTierExperiment -v ./encode/
//
// The roles come from the series' layout (integration/py/train_series.py:
// the model's tensors, then per parameter the optimizer's state), which the
// test checks against the file sizes.
func TestLossyTierExperiment(t *testing.T) {
	skipShortSeries(t)
	var report strings.Builder
	fmt.Fprintf(&report, "%-12s %-10s %-7s %7s %7s %8s  %s\n", "set", "role", "scheme", "base", "delta", "zeroed", "max error")
	eachSeriesRole(t, func(set, role string, s seriesSet, idx []int) {
		files := make([][]float32, len(s.Files))
		for k, f := range s.Files {
			files[k] = gatherFloats(f, idx)
		}
		for _, sc := range lossySchemes(role) {
			base, delta, plain, zeroed, maxErr := codeTier(t, files, sc)
			fmt.Fprintf(&report, "%-12s %-10s %-7s %7.4f %7.4f %8.2g  %.3g (%s)\n",
				set, role, sc.name, float64(base)/float64(plain), float64(delta)/float64(plain), zeroed, maxErr, sc.errKind)
			if sc.bound > 0 && maxErr > sc.bound {
				t.Errorf("%s %s %s: error %.3g past the scheme's bound %.3g", set, role, sc.name, maxErr, sc.bound)
			}
		}
	})
	t.Log("\n" + report.String())
}

// eachSeriesRole calls fn with the element indices of each tensor role
// (weights, momentum, variance) of each fp32 series of train_series.py's
// MLP.
func eachSeriesRole(t *testing.T, fn func(set, role string, s seriesSet, idx []int)) {
	t.Helper()
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s := loadSeries(t, set, "fp32", Float32)
		roles, ok := seriesRoles(set, len(s.Files[0])/4)
		if !ok {
			t.Fatalf("%s: %d floats per checkpoint: not the layout of train_series.py's MLP", set, len(s.Files[0])/4)
		}
		for _, role := range []string{"weights", "momentum", "variance"} {
			if idx := roles[role]; idx != nil {
				fn(set, role, s, idx)
			}
		}
	}
}

// seriesRoles maps each role to the element indices of a checkpoint of
// train_series.py's MLP (256-512-512-512-10): the weights, then per
// parameter Adam's exp_avg, exp_avg_sq and step, or SGD's momentum.
func seriesRoles(set string, floats int) (map[string][]int, bool) {
	params := []int{512 * 256, 512, 512 * 512, 512, 512 * 512, 512, 10 * 512, 10}
	n := 0
	for _, p := range params {
		n += p
	}
	roles := map[string][]int{"weights": span(0, n)}
	off := n
	if strings.HasPrefix(set, "adam") {
		if floats != 3*n+len(params) {
			return nil, false
		}
		for _, p := range params {
			roles["momentum"] = append(roles["momentum"], span(off, p)...)
			roles["variance"] = append(roles["variance"], span(off+p, p)...)
			off += 2*p + 1 // and the step
		}
		return roles, true
	}
	if floats != 2*n {
		return nil, false
	}
	roles["momentum"] = span(off, n)
	return roles, true
}

func span(off, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = off + i
	}
	return s
}

func gatherFloats(b []byte, idx []int) []float32 {
	out := make([]float32, len(idx))
	for i, j := range idx {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
	return out
}

// lossyScheme turns a role's floats into what a tier stores (as float32
// bytes, coded by the lossless codec, or as quantized bytes with a scale
// per chunk) and back.
type lossyScheme struct {
	name    string
	errKind string
	bound   float64
	// round returns the floats the tier keeps, as float32 bytes; nil for
	// a quantizing scheme.
	round func(x float32) float32
	// quantize codes a chunk as bytes and a scale, and dequant decodes one;
	// domain is the value in which the quantization is uniform, in which
	// its error is measured.
	quantize func(x []float32) ([]byte, float32)
	dequant  func(q byte, scale float32) float32
	domain   func(x float32) float64
}

func lossySchemes(role string) []lossyScheme {
	exact := lossyScheme{name: "exact", errKind: "none", round: func(x float32) float32 { return x }}
	bf16 := lossyScheme{name: "bf16", errKind: "max relative", bound: 1.0 / 256, round: roundBF16}
	// No bound: values under float16's smallest normal (6.1e-5) lose
	// their precision, and the zeroed column counts those it flushes.
	fp16 := lossyScheme{name: "fp16", errKind: "max relative", round: roundFP16}
	q8 := lossyScheme{name: "q8", errKind: "max abs / max |x| per chunk", bound: 1.0 / 254 * 1.0001, quantize: quantize8, dequant: func(q byte, s float32) float32 { return float32(int8(q)) * s },
		domain: func(x float32) float64 { return float64(x) }}
	// Fewer mantissa bits than bfloat16's 7, float32's range kept: the
	// planes codec then stores fewer nonzero bit planes.
	m4 := lossyScheme{name: "m4", errKind: "max relative", bound: 1.0 / 32, round: func(x float32) float32 { return RoundMantissa(x, 4) }}
	m3 := lossyScheme{name: "m3", errKind: "max relative", bound: 1.0 / 16, round: func(x float32) float32 { return RoundMantissa(x, 3) }}
	sched := []lossyScheme{exact, bf16, m4, m3, fp16, q8}
	if role == "variance" {
		// exp_avg_sq enters Adam's step as its square root: quantize that.
		sq := lossyScheme{name: "q8sqrt", errKind: "max abs of sqrt / max sqrt per chunk", bound: 1.0 / 510 * 1.0001, quantize: quantize8Sqrt, domain: func(x float32) float64 { return math.Sqrt(float64(x)) }, dequant: func(q byte, s float32) float32 {
			r := float32(q) * s
			return r * r
		}}
		sched = append(sched, sq)
	}
	return sched
}

// roundBF16 rounds x to the nearest bfloat16 (ties to even), as float32.
func roundBF16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0x7f800000 {
		return x // inf, NaN
	}
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

// roundFP16 rounds x to the nearest float16 value (ties to even), as
// float32; past float16's range it keeps x (a tier would keep such a tensor
// exact).
func roundFP16(x float32) float32 {
	a := math.Abs(float64(x))
	if a > 65504 || a == 0 || math.IsNaN(a) {
		return x
	}
	e := math.Floor(math.Log2(a))
	if e < -14 {
		e = -14 // subnormal: a fixed step of 2^-24
	}
	step := math.Pow(2, e-10)
	return float32(math.RoundToEven(float64(x)/step) * step)
}

// quantize8 is Check-QZP's k-bit uniform quantization at k = 8: a scale of
// max|x|/127 per chunk and round(x/scale) as a signed byte.
func quantize8(x []float32) ([]byte, float32) {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	if m == 0 {
		return make([]byte, len(x)), 0
	}
	s := float32(m / 127)
	q := make([]byte, len(x))
	for i, v := range x {
		q[i] = byte(int8(math.Round(float64(v / s))))
	}
	return q, s
}

// quantize8Sqrt quantizes sqrt(x) of non-negative x to 0..255.
func quantize8Sqrt(x []float32) ([]byte, float32) {
	var m float64
	for _, v := range x {
		m = max(m, math.Sqrt(math.Max(0, float64(v))))
	}
	if m == 0 {
		return make([]byte, len(x)), 0
	}
	s := float32(m / 255)
	q := make([]byte, len(x))
	for i, v := range x {
		q[i] = byte(math.Round(math.Sqrt(math.Max(0, float64(v))) / float64(s)))
	}
	return q, s
}

// codeTier codes every checkpoint of a role under sc and returns the bytes
// stored as baselines and as deltas (each checkpoint after the first
// against the previous, both tiered; quantized bytes are coded as bytes,
// their delta as the byte difference), the plain bytes per checkpoint
// summed over the checkpoints after the first, the fraction of the nonzero
// values it makes zero, and the largest error (relative errors over the
// values in float32's normal range: a float32 subnormal has fewer bits than
// bfloat16 keeps).
func codeTier(t *testing.T, files [][]float32, sc lossyScheme) (base, delta, plain int, zeroed, maxErr float64) {
	var nonzero, zeros int
	cd := NewCoder()
	var prev []byte
	for k, x := range files {
		var cur []byte
		chunkErr := 0.0
		for off := 0; off < len(x); off += chunkElems {
			c := x[off:min(off+chunkElems, len(x))]
			if sc.round != nil {
				b := make([]byte, 4*len(c))
				for i, v := range c {
					r := sc.round(v)
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(r))
					if v != 0 {
						nonzero++
						if r == 0 {
							zeros++
						}
					}
					if math.Abs(float64(v)) >= 0x1p-126 {
						chunkErr = max(chunkErr, math.Abs(float64(r-v))/math.Abs(float64(v)))
					}
				}
				cur = append(cur, b...)
				continue
			}
			q, s := sc.quantize(c)
			var m float64
			for i, v := range c {
				d := sc.dequant(q[i], s)
				if v != 0 {
					nonzero++
					if d == 0 {
						zeros++
					}
				}
				m = max(m, math.Abs(sc.domain(v)))
				chunkErr = max(chunkErr, math.Abs(sc.domain(d)-sc.domain(v)))
			}
			if m > 0 {
				maxErr = max(maxErr, chunkErr/m)
			}
			chunkErr = 0
			cur = append(cur, q...)
			cur = binary.LittleEndian.AppendUint32(cur, math.Float32bits(s))
		}
		maxErr = max(maxErr, chunkErr)
		if k == 0 {
			prev = cur
			continue
		}
		plain += 4 * len(x)
		dt, width := Float32, 4*chunkElems
		if sc.round == nil {
			dt, width = Bytes, chunkElems+4
		}
		for off := 0; off < len(cur); off += width {
			c := cur[off:min(off+width, len(cur))]
			r := prev[off:min(off+width, len(prev))]
			b := bestCode(t, cd, dt, c, nil)
			base += b
			if dt == Bytes {
				d := make([]byte, len(c))
				for i := range c {
					d[i] = c[i] - r[i]
				}
				delta += min(b, bestCode(t, cd, Bytes, d, nil))
			} else {
				delta += bestCode(t, cd, dt, c, r)
			}
		}
		prev = cur
	}
	return base, delta, plain, float64(zeros) / float64(max(1, nonzero)), maxErr
}

// bestCode is the size of the smaller of the default codec's and zstd's
// coding of plain against ref, checked by decoding it.
func bestCode(t *testing.T, cd *Coder, dt DType, plain, ref []byte) int {
	best := -1
	for _, c := range []Codec{DefaultCodec, Zstd} {
		enc, err := cd.Encode(nil, c, dt, plain, ref)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := cd.Decode(nil, enc, ref)
		if err != nil || !bytes.Equal(dec, plain) {
			t.Fatalf("%v does not decode what it coded: %v", c, err)
		}
		if best < 0 || len(enc) < best {
			best = len(enc)
		}
	}
	return best
}

package encode

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// The `scaled` codec is planes against a predicted reference: the reference
// chunk multiplied by one float32 factor. Adam's second moment decays by
// beta2 per step (0.999^128 = 0.88 between two saves 128 steps apart), so
// most of exp_avg_sq is its reference scaled by one number; planes' SUB
// against the unscaled reference pays for that shift in every element.
// The factor is estimated from the chunk itself (the median ratio of a
// sample), so the codec needs to know neither the role nor the optimizer.
//
// Payload: a predictor byte, then
//
//	0: a planes payload (against the reference as given, or a baseline)
//	1: float32 factor f (LE; finite, > 0, not 1), then a planes payload
//	   coded against ref' (float32 chunks with a reference only), where
//	   ref'[i] = float32(ref[i]) * f for each finite element and ref[i]
//	   itself for NaN and ±Inf (whose payload bits a multiply would not
//	   keep the same on every machine); the tail bytes are copied.
const (
	predNone  = 0
	predScale = 1
)

// The factor's candidates come from the ratios of ratioSample elements and
// are judged on scaleSample elements: on the series these choose as well as
// 4096 of each, in a small part of the time (sorting the ratios dominates).
const (
	ratioSample = 256
	scaleSample = 1024
)

// scaleGain is the mean saving, in bits of the SUB delta per sampled
// element, that the scaled reference must show to be used: below it the
// choice is noise and a chunk would pay 5 bytes and a scaling pass for
// nothing.
const scaleGain = 0.5

func (cd *Coder) encodeScaled(dst []byte, dt DType, plain, ref []byte) ([]byte, bool, error) {
	if scalable(dt) && ref != nil {
		if f, ok := chooseScale(dt, plain, ref); ok {
			cd.scaled = scaleRef(dt, grow(cd.scaled, len(ref)), ref, f)
			start := len(dst)
			dst = append(dst, predScale)
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
			out, delta, err := cd.encodePlanes(dst, dt, plain, cd.scaled)
			if err != nil || delta {
				return out, delta, err
			}
			// planes re-baselined the chunk: its payload needs no
			// reference, so it is the same under predictor 0 (a scaled
			// record is only legal on a delta).
			out[start] = predNone
			return append(out[:start+1], out[start+5:]...), false, nil
		}
	}
	return cd.encodePlanes(append(dst, predNone), dt, plain, ref)
}

func (cd *Coder) decodeScaled(out []byte, dt DType, payload, ref []byte) error {
	if len(payload) < 1 {
		return fmt.Errorf("%w: scaled payload empty", ErrCorrupt)
	}
	switch payload[0] {
	case predNone:
		return cd.decodePlanes(out, dt, payload[1:], ref)
	case predScale:
		if !scalable(dt) || ref == nil || len(payload) < 5 {
			return fmt.Errorf("%w: scaled record without a float32 or bfloat16 reference", ErrCorrupt)
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(payload[1:]))
		if !validScale(f) {
			return fmt.Errorf("%w: scale factor %g", ErrCorrupt, f)
		}
		cd.scaled = scaleRef(dt, grow(cd.scaled, len(ref)), ref, f)
		return cd.decodePlanes(out, dt, payload[5:], cd.scaled)
	}
	return fmt.Errorf("%w: scaled predictor %d", ErrCorrupt, payload[0])
}

// scalable: the dtypes whose references are scaled (bfloat16 is float32's
// top half, so both scale in float32).
func scalable(dt DType) bool { return dt == Float32 || dt == BFloat16 }

func validScale(f float32) bool {
	return f > 0 && f != 1 && !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f))
}

// elem reads element i as float32 bits; put writes float32 bits back,
// rounding bfloat16 to nearest, ties to even (no NaN reaches it).
func elem(dt DType, b []byte, i int) uint32 {
	if dt == BFloat16 {
		return uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16
	}
	return binary.LittleEndian.Uint32(b[4*i:])
}

func put(dt DType, b []byte, i int, u uint32) {
	if dt == BFloat16 {
		binary.LittleEndian.PutUint16(b[2*i:], uint16((u+0x7fff+(u>>16&1))>>16))
		return
	}
	binary.LittleEndian.PutUint32(b[4*i:], u)
}

// scaleElem is one element of the scaled reference: NaN and ±Inf stay as
// they are (a multiply would not keep their payload bits the same on every
// machine); finite values are multiplied in float32.
func scaleElem(u uint32, f float32) uint32 {
	if u&0x7f800000 == 0x7f800000 {
		return u
	}
	return math.Float32bits(math.Float32frombits(u) * f)
}

// scaleRef writes ref scaled by f into dst (len(ref) bytes); the tail
// bytes after the last whole element are copied.
func scaleRef(dt DType, dst, ref []byte, f float32) []byte {
	w := dt.Width()
	n := len(ref) / w
	if dt == Float32 {
		dst := dst[:4*n]
		for i := 4 * simdScale32(dst, ref, n, f); i+4 <= len(dst); i += 4 {
			u := binary.LittleEndian.Uint32(ref[i : i+4])
			s := math.Float32bits(math.Float32frombits(u) * f)
			if u&0x7f800000 == 0x7f800000 {
				s = u
			}
			binary.LittleEndian.PutUint32(dst[i:i+4], s)
		}
	} else {
		for i := range n {
			put(dt, dst, i, scaleElem(elem(dt, ref, i), f))
		}
	}
	copy(dst[w*n:], ref[w*n:])
	return dst
}

// chooseScale estimates the factor from a sample of the ratios plain/ref
// (elements where both are positive and finite): their median, and the
// centres of their densest windows, which find the elements that only
// decayed when many others were renewed by new gradients (those pull the
// median up). The candidate with the shorter SUB deltas on the sample is
// kept when it beats the unscaled reference by scaleGain bits per element.
func chooseScale(dt DType, plain, ref []byte) (float32, bool) {
	n := len(plain) / dt.Width()
	var buf [ratioSample + 1]float64
	ratios := buf[:0]
	for i, rs := 0, max(1, n/ratioSample); i < n; i += rs {
		u := math.Float32frombits(elem(dt, plain, i))
		r := math.Float32frombits(elem(dt, ref, i))
		if u > 0 && r > 0 && u <= math.MaxFloat32 && r <= math.MaxFloat32 {
			ratios = append(ratios, float64(u)/float64(r))
		}
	}
	if len(ratios) < 64 {
		return 1, false
	}
	slices.Sort(ratios)
	step := max(1, n/scaleSample)
	best, bestBits := float32(1), sampleSubBits(dt, plain, ref, n, step, 1)
	plainBits := bestBits
	tried := []float32{1}
	for _, c := range append(densest(ratios), ratios[len(ratios)/2]) {
		f := float32(c)
		if !validScale(f) || slices.Contains(tried, f) {
			continue
		}
		tried = append(tried, f)
		if b := sampleSubBits(dt, plain, ref, n, step, f); b < bestBits {
			best, bestBits = f, b
		}
	}
	samples := (n + step - 1) / step
	return best, best != 1 && float64(plainBits-bestBits) >= scaleGain*float64(samples)
}

// densest returns the centres of the narrowest windows of the sorted
// ratios holding 1/8, 1/16 and 1/32 of them.
func densest(sorted []float64) []float64 {
	var out []float64
	for _, div := range []int{8, 16, 32} {
		win := len(sorted) / div
		lo := 0
		for i := 1; i+win < len(sorted); i++ {
			if sorted[i+win]-sorted[i] < sorted[lo+win]-sorted[lo] {
				lo = i
			}
		}
		out = append(out, sorted[lo+win/2])
	}
	return out
}

// sampleSubBits is the summed bit length of the SUB deltas of every step-th
// element against the reference scaled by f, in the dtype's own width.
func sampleSubBits(dt DType, plain, ref []byte, n, step int, f float32) int {
	var one [4]byte
	total := 0
	for i := 0; i < n; i += step {
		u, r := elem(dt, plain, i), elem(dt, ref, i)
		if f != 1 {
			put(dt, one[:], 0, scaleElem(r, f))
			r = elem(dt, one[:], 0)
		}
		total += subLen(u, r, dt.Width()*8)
	}
	return total
}

// subLen is the bit length of planes' SUB delta of u against r, both
// float32 bits whose top w bits are the element.
func subLen(u, r uint32, w int) int {
	m := func(x uint32) uint32 {
		if x>>31 != 0 {
			return ^x
		}
		return x ^ 0x80000000
	}
	d := int32(m(u)-m(r)) >> (32 - w)
	return bits.Len32(uint32(d<<1) ^ uint32(d>>31))
}

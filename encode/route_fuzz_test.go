package encode

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzGrouped: any chunk coded with any grouping (thresholds, mask,
// transform) must round-trip, and the routing kernels, where the machine
// has them, must write and read exactly what the portable code does.
func FuzzGrouped(f *testing.F) {
	// Small seeds: the minimizer's work grows with the square of an
	// interesting input's length.
	walk, wref := genPair(rand.New(rand.NewPCG(1, 2)), Float32, 40, "walk")
	f.Add(walk, wref, uint8(Float32), uint8(modeSUB), []byte{0x79, 0x7b}, true)
	f.Add(walk, wref, uint8(BFloat16), uint8(modeBase), []byte{0x7a}, false)
	f.Add(walk, wref, uint8(Float16), uint8(modeXOR), []byte{}, true)
	f.Add(walk[:24], wref[:24], uint8(Float64), uint8(modeSUB), []byte{1, 2, 3}, true)
	f.Fuzz(func(t *testing.T, plain, ref []byte, dtype, mode uint8, thr []byte, masked bool) {
		dt := DType(dtype%4) + 1 // the float types
		w := dt.Width()
		// The inputs are the fuzzer's: work on copies.
		plain = append([]byte(nil), plain...)
		r := make([]byte, len(plain))
		copy(r, ref)
		ref = r
		n := len(plain) / w
		// Some elements unchanged, so that masks have something to do.
		for i := 0; i < n; i += 3 {
			copy(plain[i*w:(i+1)*w], ref[i*w:(i+1)*w])
		}
		g := grouping{k: 1, masked: masked}
		for _, c := range thr {
			if g.k == maxGroups {
				break
			}
			if g.k == 1 || c > g.thr[g.k-2] {
				g.thr[g.k-1] = c
				g.k++
			}
		}
		if g.k == 1 && !masked {
			g.masked = true
		}
		ch := planeChoice{mode: planeMode(mode % 3), grp: g}
		ch.t = shiftOf(w, plain[:n*w], ref[:n*w], n)
		defer func(k bool) { useRouteAVX2 = k }(useRouteAVX2)
		kernels := useRouteAVX2
		cd := NewCoder()
		useRouteAVX2 = false
		enc := cd.pl.encodeGrouped(nil, w, plain, ref, n, ch)
		if kernels {
			useRouteAVX2 = true
			if k := cd.pl.encodeGrouped(nil, w, plain, ref, n, ch); !bytes.Equal(k, enc) {
				t.Fatalf("%s %+v: kernel chunk differs from the portable one", dt, ch)
			}
		}
		for _, k := range []bool{false, kernels} {
			useRouteAVX2 = k
			out := make([]byte, len(plain))
			if err := cd.decodePlanes(out, dt, enc, ref); err != nil || !bytes.Equal(out, plain) {
				t.Fatalf("%s %+v kernels=%t: round trip failed: %v", dt, ch, k, err)
			}
		}
	})
}

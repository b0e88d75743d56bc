package encode

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSplitLayoutExperiment measures what a layout that a precision view
// could read from its high planes alone would cost (issue 51, docs/
// ARCHIVE.md "Reads at a chosen precision"). Today a baseline rotates the
// sign into bit 0 and a SUB delta zigzags the whole 32-bit difference, so
// the high planes of a float cannot be rebuilt without the low ones. The
// split layouts subtract the high h bits and the low 32-h bits of each
// order-preserving value separately (each zigzagged in its own width), and
// rotate a baseline's sign within the high part only; the high planes then
// rebuild the high h bits of every value exactly, against the high planes
// of the reference. Each layout is coded with the planes codec's block
// coder (no groups, no scaled reference), per 64 Ki-element chunk, every
// checkpoint of a role against the one before; "today" is the store's
// default codec on the same chunks. It also times decoding the high planes
// against all four, and a view's whole rebuild of bf16 values (the high
// planes decoded, joined and widened) against today's exact decode.
// Figures with -v:
//
//	go test -run SplitLayoutExperiment -v ./encode/
//
// It fails if a split coding does not rebuild the high bits it promises,
// or the view a value other than its bfloat16 rounded toward zero.
func TestSplitLayoutExperiment(t *testing.T) {
	skipShortSeries(t)
	var report strings.Builder
	fmt.Fprintf(&report, "%-12s %-9s %-6s %8s %8s %8s %8s %8s %8s %8s %8s  %s\n",
		"set", "role", "", "today", "ref24", "ref16", "sub", "xor", "split16", "split24", "s16|xor", "high16 / high24 bytes; decode high16 / high24 / all; view16 / today (ms)")
	eachSeriesRole(t, func(set, role string, s seriesSet, idx []int) {
		files := make([][]byte, len(s.Files))
		for k, f := range s.Files {
			files[k] = gatherBytes(f, idx)
		}
		var sz splitSizes
		for k := range files {
			var ref []byte
			if k > 0 {
				ref = files[k-1]
			}
			sz.add(t, files[k], ref)
		}
		for _, kind := range []string{"base", "delta"} {
			r := sz.base
			if kind == "delta" {
				r = sz.delta
			}
			p := float64(r.plain)
			fmt.Fprintf(&report, "%-12s %-9s %-6s %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f  %.4f / %.4f; %.1f / %.1f / %.1f; %.1f / %.1f\n",
				set, role, kind, float64(r.today)/p, float64(r.trunc24)/p, float64(r.trunc16)/p, float64(r.sub)/p, float64(r.xor)/p, float64(r.split16)/p, float64(r.split24)/p, float64(r.best16)/p,
				float64(r.high16)/p, float64(r.high24)/p, r.dec16.Seconds()*1e3, r.dec24.Seconds()*1e3, r.decAll.Seconds()*1e3,
				r.view16.Seconds()*1e3, r.decToday.Seconds()*1e3)
		}
	})
	t.Log("\n" + report.String())
}

func gatherBytes(b []byte, idx []int) []byte {
	out := make([]byte, 4*len(idx))
	for i, j := range idx {
		copy(out[4*i:4*i+4], b[4*j:4*j+4])
	}
	return out
}

type splitRow struct {
	plain, today, sub, xor, split16, split24, best16 int
	high16, high24                                   int // bytes of the high planes
	// today's codec against the reference's high 24 (16) bits only: what
	// a prediction a view can rebuild would keep of it
	trunc24, trunc16     int
	dec16, dec24, decAll time.Duration
	// view16: the high planes decoded and joined into bf16 values;
	// decToday: today's codec decoding the exact chunk
	view16, decToday time.Duration
}

type splitSizes struct{ base, delta splitRow }

// add codes one checkpoint (ref nil: as a baseline) chunk by chunk.
func (sz *splitSizes) add(t *testing.T, plain, ref []byte) {
	t.Helper()
	row := &sz.base
	if ref != nil {
		row = &sz.delta
	}
	cd := NewCoder()
	// The view's buffers, touched once: a page fault per page would
	// cost more than the join.
	viewBuf, refHiBuf, halfBuf := make([]byte, 4*chunkElems), make([]byte, 2*chunkElems), make([]byte, 2*chunkElems)
	fillByte(viewBuf, 1)
	fillByte(refHiBuf, 1)
	fillByte(halfBuf, 1)
	for off := 0; off < len(plain); off += 4 * chunkElems {
		p := plain[off:min(off+4*chunkElems, len(plain))]
		var r []byte
		if ref != nil {
			r = ref[off : off+len(p)]
		}
		n := len(p) / 4
		row.plain += len(p)
		enc, err := cd.Encode(nil, DefaultCodec, Float32, p, r)
		if err != nil {
			t.Fatal(err)
		}
		row.today += len(enc)
		decStart := time.Now()
		if _, err := cd.Decode(nil, enc, r); err != nil {
			t.Fatal(err)
		}
		row.decToday += time.Since(decStart)
		if r != nil {
			for _, c := range []struct {
				keep uint
				sum  *int
			}{{24, &row.trunc24}, {16, &row.trunc16}} {
				tr := make([]byte, len(r))
				for i := 0; i+4 <= len(r); i += 4 {
					binary.LittleEndian.PutUint32(tr[i:], binary.LittleEndian.Uint32(r[i:])&^(1<<(32-c.keep)-1))
				}
				e, err := cd.Encode(nil, DefaultCodec, Float32, p, tr)
				if err != nil {
					t.Fatal(err)
				}
				*c.sum += len(e)
			}
		} else {
			row.trunc24 += len(enc)
			row.trunc16 += len(enc)
		}
		code := func(v []uint32) ([]byte, []byte) {
			pl := make([]byte, 4*n)
			for i, x := range v {
				for j := 0; j < 4; j++ {
					pl[j*n+i] = byte(x >> (8 * j))
				}
			}
			return pl, cd.pl.appendPlanes(nil, pl, n, 4, nil)
		}
		s16, s24 := make([]uint32, n), make([]uint32, n)
		var sub, xor []uint32
		for i := 0; i < n; i++ {
			u := binary.LittleEndian.Uint32(p[4*i:])
			if r == nil {
				s16[i] = splitBase(u, 16)
				s24[i] = splitBase(u, 24)
				continue
			}
			q := binary.LittleEndian.Uint32(r[4*i:])
			s16[i] = splitSub(u, q, 16)
			s24[i] = splitSub(u, q, 24)
			sub = append(sub, subMono32(u, q))
			xor = append(xor, u^q)
		}
		pl16, c16 := code(s16)
		pl24, c24 := code(s24)
		row.split16 += len(c16)
		row.split24 += len(c24)
		if r == nil {
			rot := make([]uint32, n)
			for i := range rot {
				u := binary.LittleEndian.Uint32(p[4*i:])
				rot[i] = u<<1 | u>>31
			}
			_, c := code(rot)
			row.sub += len(c)
			row.xor += len(c)
			row.best16 += len(c16)
		} else {
			_, cs := code(sub)
			_, cx := code(xor)
			row.sub += len(cs)
			row.xor += len(cx)
			row.best16 += min(len(c16), len(cx))
		}
		// The split codings must rebuild their high bits from the high
		// planes alone (and the reference's high bits).
		for i := 0; i < n; i++ {
			u := binary.LittleEndian.Uint32(p[4*i:])
			var q uint32
			if r != nil {
				q = binary.LittleEndian.Uint32(r[4*i:])
			}
			for _, h := range []uint{16, 24} {
				pl := pl16
				if h == 24 {
					pl = pl24
				}
				var hv uint32
				for j := uint(4 - h/8); j < 4; j++ {
					hv |= uint32(pl[int(j)*n+i]) << (8 * j)
				}
				if got := splitHigh(hv, q, r != nil, h); got != u>>(32-h) {
					t.Fatalf("split%d: element %d rebuilds high bits %#x, want %#x", h, i, got, u>>(32-h))
				}
			}
		}
		// Decoding the high planes only, against all four. A view's
		// layout would record where each plane starts; here a first
		// decode finds the records.
		out := make([]byte, 4*n)
		for _, c := range []struct {
			enc    []byte
			planes int
			d      *time.Duration
			high   *int
		}{{c16, 2, &row.dec16, &row.high16}, {c24, 3, &row.dec24, &row.high24}, {c16, 4, &row.decAll, nil}} {
			type record struct {
				blk []byte
				src []byte
			}
			var recs []record
			src := c.enc
			for j := 0; j < 4; j++ {
				for o := 0; o < n; o += planeBlock {
					blk := out[j*n+o : j*n+min(o+planeBlock, n)]
					if j >= 4-c.planes {
						recs = append(recs, record{blk, src})
					}
					rest, err := cd.pl.decodeBlock(blk, src, 0, cd.zstdInto)
					if err != nil {
						t.Fatal(err)
					}
					if j >= 4-c.planes && c.high != nil {
						*c.high += len(src) - len(rest)
					}
					src = rest
				}
			}
			start := time.Now()
			for _, rc := range recs {
				if _, err := cd.pl.decodeBlock(rc.blk, rc.src, 0, cd.zstdInto); err != nil {
					t.Fatal(err)
				}
			}
			lastDecode := time.Since(start)
			*c.d += lastDecode
			if c.planes == 2 {
				// The view's join: the high halves are bfloat16 values
				// coded as the codec codes bf16 chunks (rotated sign, or
				// a 16-bit SUB), so its 16-bit join rebuilds them from
				// the reference's high halves; then each is widened to
				// float32.
				refHi := refHiBuf[:2*n]
				if r != nil {
					for i := 0; i < n; i++ {
						binary.LittleEndian.PutUint16(refHi[2*i:], uint16(binary.LittleEndian.Uint32(r[4*i:])>>16))
					}
				}
				view, half := viewBuf[:4*n], halfBuf[:2*n]
				mode := modeBase
				if r != nil {
					mode = modeSUB
				} else {
					refHi = nil
				}
				joinStart := time.Now()
				joinAny(half, out[2*n:4*n], refHi, n, 2, mode, 0)
				widenBF16(view, half)
				row.view16 += time.Since(joinStart) + lastDecode
				for i := 0; i < n; i++ {
					if got, want := binary.LittleEndian.Uint32(view[4*i:])>>16, binary.LittleEndian.Uint32(p[4*i:])>>16; got != want {
						t.Fatalf("view: element %d is %#x, want %#x", i, got, want)
					}
				}
			}
		}
	}
}

// widenBF16 writes each bfloat16 of half as the float32 it stands for,
// four at a time.
func widenBF16(out, half []byte) {
	out = out[:2*len(half)]
	i := 0
	for ; i+8 <= len(half); i += 8 {
		w := binary.LittleEndian.Uint64(half[i:])
		binary.LittleEndian.PutUint64(out[2*i:], w&0xffff<<16|w&0xffff0000<<32)
		binary.LittleEndian.PutUint64(out[2*i+8:], w>>16&0xffff0000|w>>32&0xffff0000<<32)
	}
	for ; i+2 <= len(half); i += 2 {
		binary.LittleEndian.PutUint32(out[2*i:], uint32(binary.LittleEndian.Uint16(half[i:]))<<16)
	}
}

// splitBase rotates the sign within the high h bits: the top plane holds
// the exponent, and the sign stays among the high planes.
func splitBase(u uint32, h uint) uint32 {
	lo := 32 - h
	hi := u >> lo
	hi = (hi<<1 | hi>>(h-1)) & (1<<h - 1)
	return hi<<lo | u&(1<<lo-1)
}

// splitSub is the split SUB delta: the high h bits and the low 32-h bits
// of mono(u) - mono(q), each subtracted and zigzagged in its own width.
func splitSub(u, q uint32, h uint) uint32 {
	lo := 32 - h
	a, b := monoBits(u), monoBits(q)
	hd := zigzagN((a>>lo)-(b>>lo), h)
	ld := zigzagN(a-b, lo)
	return hd<<lo | ld
}

// splitHigh rebuilds u's high h bits from the high part of its split
// coding and the reference (delta) or alone (baseline).
func splitHigh(hv, q uint32, delta bool, h uint) uint32 {
	lo := 32 - h
	v := hv >> lo
	if !delta {
		return (v>>1 | v<<(h-1)) & (1<<h - 1)
	}
	d := unzigzagN(v, h)
	m := (monoBits(q)>>lo + d) & (1<<h - 1)
	// mono's inverse on the high bits: the sign is the top bit.
	if m>>(h-1) == 1 {
		return m ^ 1<<(h-1)
	}
	return ^m & (1<<h - 1)
}

func monoBits(u uint32) uint32 {
	if u>>31 == 1 {
		return ^u
	}
	return u | 1<<31
}

// zigzagN zigzags the low w bits of x read as a w-bit signed number.
func zigzagN(x uint32, w uint) uint32 {
	m := uint32(1)<<w - 1
	if w == 32 {
		m = ^uint32(0)
	}
	s := int32(x<<(32-w)) >> (32 - w) // sign-extend
	return uint32(s<<1^s>>31) & m
}

func unzigzagN(z uint32, w uint) uint32 { return z>>1 ^ -(z & 1) }

func subMono32(u, q uint32) uint32 { return zigzagN(monoBits(u)-monoBits(q), 32) }

package encode

import (
	"testing"
)

// TestContextExperiment measures, with real coders and their tables, what
// splitting a plane's bytes by a context known to the decoder would save:
// (a) every plane by the reference element's exponent, merged into at most
// 8 groups of at least 4096 elements; (b) lower planes by whether the
// element's higher planes are all zero. Each partition is coded with the
// block coder (appendBlock), so the figures include table costs, and both
// splits must come out smaller than the unsplit planes: (a) is what groups
// (group.go) are built on. Figures with -v:
//
//	go test -run ContextExperiment -v ./encode/
func TestContextExperiment(t *testing.T) {
	skipShortSeries(t)
	for _, s := range benchSets(t) {
		w := s.DType.Width()
		l := layoutOf(s.DType)
		var ps planeScratch
		base, ctxExp, ctxAbove, total := 0, 0, 0, 0
		code := func(b []byte) int {
			if len(b) == 0 {
				return 0
			}
			return len(ps.appendBlock(nil, b, 0))
		}
		for _, p := range s.deltaPairs() {
			n := len(p.plain) / w
			if n < 4096 {
				continue
			}
			pl := make([]byte, n*w)
			splitAny(pl, p.plain, p.ref, n, w, modeSUB, 0)
			exp := make([]int, n)
			var cnt [2048]int
			for i := 0; i < n; i++ {
				e, _ := l.split(loadWord(p.ref[i*w:], w))
				exp[i] = int(e)
				cnt[e]++
			}
			// Merge exponents in order into groups of >= 4096, at most 8.
			group := make([]int, 2048)
			g, acc := 0, 0
			for e := range cnt {
				group[e] = g
				acc += cnt[e]
				if acc >= max(4096, n/8) && g < 7 {
					g, acc = g+1, 0
				}
			}
			total += n * w
			above := make([]bool, n) // higher planes all zero
			for i := range above {
				above[i] = true
			}
			for j := w - 1; j >= 0; j-- {
				plane := pl[j*n : (j+1)*n]
				base += code(plane)
				parts := make([][]byte, 8)
				for i, b := range plane {
					parts[group[exp[i]]] = append(parts[group[exp[i]]], b)
				}
				sz := 0
				for _, q := range parts {
					if len(q) > 0 {
						sz += code(q)
					}
				}
				ctxExp += sz
				if j == w-1 {
					ctxAbove += sz // the top plane has nothing above it
				} else {
					var a, b []byte
					for i, v := range plane {
						if above[i] {
							a = append(a, v)
						} else {
							b = append(b, v)
						}
					}
					ctxAbove += code(a) + code(b)
				}
				for i, v := range plane {
					above[i] = above[i] && v == 0
				}
			}
		}
		if total == 0 {
			t.Fatalf("%s: no delta chunk of 4096 elements or more", s.Name)
		}
		t.Logf("%s: plain %d, planes %.4f, split by ref exponent %.4f (%+.1f%%), top by exponent + lower by above-zero %.4f (%+.1f%%)",
			s.Name, total, float64(base)/float64(total), float64(ctxExp)/float64(total), 100*(float64(ctxExp)/float64(base)-1),
			float64(ctxAbove)/float64(total), 100*(float64(ctxAbove)/float64(base)-1))
		if ctxExp >= base {
			t.Errorf("%s: planes split by the reference's exponent take %d bytes, no fewer than the unsplit planes' %d", s.Name, ctxExp, base)
		}
		if ctxAbove >= base {
			t.Errorf("%s: planes split by exponent and above-zero take %d bytes, no fewer than the unsplit planes' %d", s.Name, ctxAbove, base)
		}
	}
}

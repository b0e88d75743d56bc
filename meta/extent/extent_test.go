package extent

import (
	"errors"
	"testing"
)

// FuzzSet checks Add, Remove, Insert and the takes against a set of pages:
// the extents stay sorted, disjoint and apart, and the counts they return
// are right.
func FuzzSet(f *testing.F) {
	f.Add([]byte{0, 3, 4, 1, 5, 2, 0, 1, 1})
	f.Add([]byte{2, 0, 8, 3, 2, 3, 4, 0, 5, 0, 9, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var s Set
		set := map[int64]bool{}
		for len(ops) >= 3 {
			op, start, n := ops[0]%5, int64(ops[1]%64), int64(ops[2]%9)
			ops = ops[3:]
			var had int64
			for i := start; i < start+n; i++ {
				if set[i] {
					had++
				}
			}
			mark := func(v bool) {
				for i := start; i < start+n; i++ {
					set[i] = v
				}
			}
			switch op {
			case 0:
				if got := s.Add(Extent{start, n}); got != had {
					t.Fatalf("add %d+%d: counted %d pages there already, want %d", start, n, got, had)
				}
				mark(true)
			case 1:
				if got := s.Remove(Extent{start, n}); got != had {
					t.Fatalf("remove %d+%d: removed %d pages, want %d", start, n, got, had)
				}
				mark(false)
			case 2:
				err := s.Insert(Extent{start, n})
				if (had > 0 || n == 0) != errors.Is(err, ErrOverlap) {
					t.Fatalf("insert %d+%d with %d pages there: %v", start, n, had, err)
				}
				if err == nil {
					mark(true)
				}
			case 3, 4:
				k := min(n, s.Pages())
				var got []Extent
				if op == 3 {
					got = s.TakeFront(k)
				} else {
					got = s.TakeFit(k)
				}
				if Pages(got) != k {
					t.Fatalf("took %v, want %d pages", got, k)
				}
				for _, e := range got {
					for p := e.Start; p < e.End(); p++ {
						if !set[p] {
							t.Fatalf("took page %d, which is not in the set", p)
						}
						set[p] = false
					}
				}
			}
			var pages int64
			exts := s.Extents()
			for i, e := range exts {
				if e.Len <= 0 || (i > 0 && exts[i-1].End() >= e.Start) {
					t.Fatalf("extents %v: not sorted, disjoint and apart", exts)
				}
				for p := e.Start; p < e.End(); p++ {
					if !set[p] {
						t.Fatalf("extents %v hold page %d, which is not in the set", exts, p)
					}
				}
				pages += e.Len
			}
			var want int64
			for _, v := range set {
				if v {
					want++
				}
			}
			if pages != want || s.Pages() != want {
				t.Fatalf("extents %v hold %d pages, Pages says %d, the set %d", exts, pages, s.Pages(), want)
			}
		}
	})
}

func TestTakeFitPrefersOneExtent(t *testing.T) {
	var s Set
	for _, e := range []Extent{{0, 2}, {10, 3}, {20, 8}} {
		if err := s.Insert(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.TakeFit(5); len(got) != 1 || got[0] != (Extent{20, 5}) {
		t.Errorf("TakeFit(5) = %v, want [{20 5}]", got)
	}
	if got := s.TakeFit(6); len(got) != 3 || Pages(got) != 6 || got[0] != (Extent{0, 2}) {
		t.Errorf("TakeFit(6) = %v, want the lowest pieces", got)
	}
}

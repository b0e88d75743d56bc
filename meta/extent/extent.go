// Package extent keeps runs of pages and sets of them: the free lists of
// the store's allocators (meta), the dirty pages of a modelled page cache
// (nandsim, chain/wear). It imports nothing of the store, so the simulated
// device, which stays free of the metadata database, uses it too.
package extent

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Extent is the run of pages [Start, Start+Len).
type Extent struct {
	Start int64 // first page
	Len   int64 // pages
}

// End is the first page after the extent.
func (e Extent) End() int64 { return e.Start + e.Len }

// Pages is the number of pages in exts.
func Pages(exts []Extent) int64 {
	var n int64
	for _, e := range exts {
		n += e.Len
	}
	return n
}

// ErrOverlap reports an extent inserted where the set holds some of its
// pages already (for a free list: a double free).
var ErrOverlap = errors.New("extent overlaps the set")

// Set is a set of pages, kept as sorted extents that neither overlap nor
// touch. The zero Set is empty.
type Set struct {
	exts  []Extent
	pages int64
}

// Pages is the number of pages in the set.
func (s *Set) Pages() int64 { return s.pages }

// Extents are the set's extents in order. The slice is the set's own:
// read it before the set changes again.
func (s *Set) Extents() []Extent { return s.exts }

// Add adds e's pages and returns how many of them the set held already.
func (s *Set) Add(e Extent) (overlap int64) {
	if e.Len <= 0 {
		return 0
	}
	lo := sort.Search(len(s.exts), func(i int) bool { return s.exts[i].End() >= e.Start })
	hi := lo
	merged := e
	for ; hi < len(s.exts) && s.exts[hi].Start <= e.End(); hi++ {
		x := s.exts[hi]
		overlap += max(0, min(x.End(), e.End())-max(x.Start, e.Start))
		start := min(merged.Start, x.Start)
		merged = Extent{start, max(merged.End(), x.End()) - start}
	}
	s.exts = slices.Replace(s.exts, lo, hi, merged)
	s.pages += e.Len - overlap
	return overlap
}

// Insert adds e, none of whose pages the set may hold.
func (s *Set) Insert(e Extent) error {
	if e.Len <= 0 {
		return fmt.Errorf("empty extent %v: %w", e, ErrOverlap)
	}
	i := sort.Search(len(s.exts), func(i int) bool { return s.exts[i].Start >= e.Start })
	if i < len(s.exts) && s.exts[i].Start < e.End() || i > 0 && s.exts[i-1].End() > e.Start {
		return fmt.Errorf("extent %v: %w", e, ErrOverlap)
	}
	s.Add(e)
	return nil
}

// Remove removes e's pages and returns how many of them the set held.
func (s *Set) Remove(e Extent) (removed int64) {
	if e.Len <= 0 {
		return 0
	}
	lo := sort.Search(len(s.exts), func(i int) bool { return s.exts[i].End() > e.Start })
	hi := lo
	var keep []Extent // what is left of exts[lo:hi]: at most two pieces
	for ; hi < len(s.exts) && s.exts[hi].Start < e.End(); hi++ {
		x := s.exts[hi]
		removed += min(x.End(), e.End()) - max(x.Start, e.Start)
		if x.Start < e.Start {
			keep = append(keep, Extent{x.Start, e.Start - x.Start})
		}
		if e.End() < x.End() {
			keep = append(keep, Extent{e.End(), x.End() - e.End()})
		}
	}
	s.exts = slices.Replace(s.exts, lo, hi, keep...)
	s.pages -= removed
	return removed
}

// TakeFront removes and returns the set's lowest pages, at most most of
// them, as extents in order.
func (s *Set) TakeFront(most int64) []Extent {
	var out []Extent
	for most > 0 && len(s.exts) > 0 {
		e := s.exts[0]
		k := min(e.Len, most)
		out = append(out, Extent{e.Start, k})
		s.Remove(Extent{e.Start, k})
		most -= k
	}
	return out
}

// TakeFit removes n pages (n ≤ Pages) and returns them: the lowest extent
// that holds them all, or else pieces from the lowest pages up.
func (s *Set) TakeFit(n int64) []Extent {
	for _, e := range s.exts {
		if e.Len >= n {
			out := Extent{e.Start, n}
			s.Remove(out)
			return []Extent{out}
		}
	}
	return s.TakeFront(n)
}

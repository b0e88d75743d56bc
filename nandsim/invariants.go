package nandsim

import "fmt"

// CheckInvariants verifies the FTL's internal consistency: the two maps
// agree, per-block valid counts match the maps, every block is on exactly
// the list its state says, and erase counts never went down since the last
// check. O(device size); for tests and fsck.
func (s *SSD) CheckInvariants() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkLocked()
}

func (s *SSD) checkLocked() error {
	if err := s.f.check(); err != nil {
		return err
	}
	if s.lastErases == nil {
		s.lastErases = make([]uint32, len(s.f.erases))
	}
	for b, e := range s.f.erases {
		if e < s.lastErases[b] {
			return fmt.Errorf("%w: block %d erase count fell from %d to %d", ErrInvariant, b, s.lastErases[b], e)
		}
	}
	copy(s.lastErases, s.f.erases)
	return nil
}

// check verifies the FTL's structure without trusting any of it: list walks
// are bounded and every index is range-checked, so a corrupt state decoded
// from a file is reported, never a panic or an endless loop.
func (f *ftl) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvariant}, args...)...)
	}
	nBlocks := int32(len(f.state))
	seen := make([]uint8, nBlocks) // lists (and frontiers) that hold each block
	walk := func(d int32, l blockList, what listName, want func(b int32) error) error {
		n, prev := int32(0), int32(-1)
		for b := l.head; b >= 0; b = f.next[b] {
			if b >= nBlocks || f.dieOf(b) != d {
				return bad("die %d %s list holds block %d of another die", d, what, b)
			}
			if n++; n > l.n || seen[b] > 0 {
				return bad("die %d %s list is longer than %d or revisits block %d", d, what, l.n, b)
			}
			if f.prev[b] != prev {
				return bad("die %d %s list: block %d has back link %d, want %d", d, what, b, f.prev[b], prev)
			}
			seen[b]++
			if err := want(b); err != nil {
				return err
			}
			prev = b
		}
		if n != l.n || l.tail != prev {
			return bad("die %d %s list has %d blocks ending at %d, header says %d ending at %d", d, what, n, prev, l.n, l.tail)
		}
		return nil
	}
	for d := int32(0); d < f.nDies; d++ {
		dd := &f.dies[d]
		if dd.free.n < 1 {
			return bad("die %d has no free block left for GC", d)
		}
		if err := walk(d, dd.free, listName(-1), func(b int32) error {
			if f.state[b] != blockFree || f.valid[b] != 0 {
				return bad("free block %d has state %d and %d valid pages", b, f.state[b], f.valid[b])
			}
			return nil
		}); err != nil {
			return err
		}
		for v := int32(0); v <= f.pages; v++ {
			if dd.buckets[v].n > 0 && v < dd.minValid {
				return bad("die %d: bucket %d is not empty but minValid is %d", d, v, dd.minValid)
			}
			if err := walk(d, dd.buckets[v], listName(v), func(b int32) error {
				if f.state[b] != blockClosed || f.valid[b] != v {
					return bad("block %d in bucket %d has state %d and %d valid pages", b, v, f.state[b], f.valid[b])
				}
				return nil
			}); err != nil {
				return err
			}
		}
		for _, fr := range []frontier{dd.host, dd.gc} {
			if fr.block < 0 {
				continue
			}
			if fr.block >= nBlocks || f.dieOf(fr.block) != d || f.state[fr.block] != blockOpen || seen[fr.block] > 0 {
				return bad("die %d frontier block %d is not an open block of its own", d, fr.block)
			}
			if fr.next < 0 || fr.next > f.pages {
				return bad("die %d frontier block %d at page %d", d, fr.block, fr.next)
			}
			seen[fr.block]++
		}
	}
	for b := int32(0); b < nBlocks; b++ {
		if seen[b] != 1 {
			return bad("block %d (state %d) is on %d lists or frontiers, want 1", b, f.state[b], seen[b])
		}
		if f.stamp[b] > f.tick || f.stamp[b] < 0 {
			return bad("block %d stamp %d outside [0, tick %d]", b, f.stamp[b], f.tick)
		}
	}
	return f.checkMaps()
}

// checkMaps verifies that l2p and p2l are inverse, that live pages sit in
// programmed positions, and that the valid counts match.
func (f *ftl) checkMaps() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvariant}, args...)...)
	}
	written := make([]int32, len(f.state)) // programmed pages per block
	for b := range written {
		if f.state[b] == blockClosed {
			written[b] = f.pages
		}
	}
	for d := range f.dies {
		for _, fr := range []frontier{f.dies[d].host, f.dies[d].gc} {
			if fr.block >= 0 {
				written[fr.block] = fr.next
			}
		}
	}
	var live int64
	counts := make([]int32, len(f.state))
	var err error
	f.p2l.each(func(ppn, lpn int32) {
		if err != nil {
			return
		}
		b := ppn / f.pages
		if ppn%f.pages >= written[b] {
			err = bad("physical page %d (block %d) holds logical page %d but was never programmed", ppn, b, lpn)
			return
		}
		if lpn >= f.nLogical || f.l2p.get(lpn) != ppn {
			err = bad("physical page %d claims logical page %d, which maps elsewhere", ppn, lpn)
			return
		}
		counts[b]++
		live++
	})
	if err != nil {
		return err
	}
	for b, c := range counts {
		if c != f.valid[b] {
			return bad("block %d counts %d valid pages, its pages say %d", b, f.valid[b], c)
		}
	}
	var mapped int64
	f.l2p.each(func(lpn, ppn int32) {
		if err != nil {
			return
		}
		if ppn >= f.p2l.len() || f.p2l.get(ppn) != lpn {
			err = bad("logical page %d maps to physical %d, which does not map back", lpn, ppn)
			return
		}
		mapped++
	})
	if err != nil {
		return err
	}
	if mapped != live {
		return bad("%d live logical pages but %d valid physical pages", mapped, live)
	}
	return nil
}

// listName names a list in messages: the free list (-1) or a bucket. A type
// of its own so that naming costs nothing unless a check fails.
type listName int32

func (n listName) String() string {
	if n < 0 {
		return "free"
	}
	return fmt.Sprintf("bucket %d", int32(n))
}

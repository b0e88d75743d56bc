package nandsim

import "fmt"

// collect runs one GC on die d: it cleans victims until the die has
// f.high free blocks or no closed block has an invalid page left.
//
// Why it never runs out of room: GC copies into its own frontier, which with
// the free blocks offers A + F x P pages. That is at least P when GC starts
// (the host takes a block only while two are free, so one is). A victim
// has v < P valid pages, and cleaning it returns P pages for v used, so
// the room grows with every victim and the next one always fits.
func (f *ftl) collect(d int32) error {
	dd := &f.dies[d]
	f.ctr.gcRuns++
	for dd.free.n < f.high {
		b := f.victim(d)
		if b < 0 {
			break
		}
		if err := f.clean(d, b); err != nil {
			return err
		}
	}
	if f.afterGC != nil {
		return f.afterGC()
	}
	return nil
}

// clean copies the valid pages of closed block b into the GC frontier, then
// erases b. Copies stay on the die (copyback): no bus transfer is charged.
func (f *ftl) clean(d, b int32) error {
	dd := &f.dies[d]
	f.unlink(&dd.buckets[f.valid[b]], b)
	base := b * f.pages
	copies := int64(0)
	for p := base; p < base+f.pages; p++ {
		lpn := f.p2l.get(p)
		if lpn < 0 {
			continue
		}
		if dd.gc.block < 0 || dd.gc.next == f.pages {
			if dd.gc.block >= 0 {
				f.closeBlock(dd.gc.block)
			}
			nb := f.popFront(&dd.free)
			if nb < 0 {
				return fmt.Errorf("%w: die %d has no free block for GC copies", ErrInvariant, d)
			}
			f.open(&dd.gc, nb)
		}
		f.p2l.set(p, -1)
		f.program(&dd.gc, lpn)
		copies++
	}
	f.valid[b] = 0
	f.erases[b]++
	f.state[b] = blockFree
	f.pushBack(&dd.free, b)
	f.ctr.gcCopied += copies
	f.ctr.programmed += copies
	f.ctr.erases++
	f.clock.gc(d, copies)
	return nil
}

// victim returns the closed block of die d to clean next, or -1 when every
// closed block is fully valid (cleaning one would gain nothing).
func (f *ftl) victim(d int32) int32 {
	dd := &f.dies[d]
	v := dd.minValid
	for v < f.pages && dd.buckets[v].n == 0 {
		v++
	}
	dd.minValid = v
	if v >= f.pages {
		return -1
	}
	if f.cfg.Policy == CostBenefit && v > 0 {
		return f.costBenefitVictim(dd, v)
	}
	// Greedy: fewest valid pages; among equals, the least recently touched.
	return dd.buckets[v].head
}

// costBenefitVictim maximises (1-u)/(2u) x age over the non-empty buckets
// from lowest, where u = v/P and age = ticks since the block was last
// programmed or had a page invalidated. Each bucket is ordered by that stamp,
// so its head is its oldest block and the best of the bucket: O(P) per pick.
func (f *ftl) costBenefitVictim(dd *die, lowest int32) int32 {
	best, bestScore := int32(-1), -1.0
	for v := lowest; v < f.pages; v++ {
		b := dd.buckets[v].head
		if b < 0 {
			continue
		}
		u := float64(v) / float64(f.pages)
		age := float64(f.tick-f.stamp[b]) + 1
		if score := (1 - u) / (2 * u) * age; score > bestScore {
			best, bestScore = b, score
		}
	}
	return best
}

package nandsim

// pageMap maps page numbers to page numbers, -1 for none. It stores n+1 so
// that "none" is the zero value: the maps of a full-size device are tens of
// MB each, and memory the OS hands out zeroed stays out of the process's
// resident set until a page of it is written. A fresh device then costs
// memory in proportion to the pages it has mapped, not to its capacity.
type pageMap []int32

func newPageMap(n int64) pageMap { return make(pageMap, n) }

func (m pageMap) get(i int32) int32 { return m[i] - 1 }

func (m pageMap) set(i, v int32) { m[i] = v + 1 }

// clone copies m, writing only the blocks of the copy that hold mappings,
// so a snapshot of a sparse map stays as sparse in memory.
func (m pageMap) clone() pageMap {
	const block = 1024 // one 4 KiB memory page of entries
	c := make(pageMap, len(m))
	for lo := 0; lo < len(m); lo += block {
		hi := min(lo+block, len(m))
		for _, v := range m[lo:hi] {
			if v != 0 {
				copy(c[lo:hi], m[lo:hi])
				break
			}
		}
	}
	return c
}

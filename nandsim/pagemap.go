package nandsim

// pageMap maps page numbers to page numbers, -1 for none. It is a two-level
// table: a chunk of mapChunk entries is allocated when its first entry is
// mapped and dropped when its last is unmapped, so the maps cost memory in
// proportion to the pages that hold data, not to the device's capacity (a
// dense map of a 1 TiB device would hold 2 GiB, and the daemon keeps two).
// Entries store page+1, so that a fresh chunk, zeroed, maps nothing.
type pageMap struct {
	chunks []*[mapChunk]int32
	used   []uint16 // mapped entries per chunk
	n      int32    // entries
	mapped int64    // mapped entries in all
}

// mapChunk entries make one chunk: 4 KiB, a memory page.
const (
	mapChunkShift = 10
	mapChunk      = 1 << mapChunkShift
)

func newPageMap(n int64) pageMap {
	nc := (n + mapChunk - 1) / mapChunk
	return pageMap{chunks: make([]*[mapChunk]int32, nc), used: make([]uint16, nc), n: int32(n)}
}

// len is the number of entries, mapped or not.
func (m *pageMap) len() int32 { return m.n }

func (m *pageMap) get(i int32) int32 {
	c := m.chunks[i>>mapChunkShift]
	if c == nil {
		return -1
	}
	return c[i&(mapChunk-1)] - 1
}

func (m *pageMap) set(i, v int32) {
	k, j := i>>mapChunkShift, i&(mapChunk-1)
	c := m.chunks[k]
	if v < 0 {
		if c == nil || c[j] == 0 {
			return
		}
		c[j] = 0
		m.mapped--
		if m.used[k]--; m.used[k] == 0 {
			m.chunks[k] = nil
		}
		return
	}
	if i >= m.n {
		panic("pageMap: index out of range")
	}
	if c == nil {
		c = new([mapChunk]int32)
		m.chunks[k] = c
	}
	if c[j] == 0 {
		m.used[k]++
		m.mapped++
	}
	c[j] = v + 1
}

// each calls fn for every mapped entry in index order, skipping unmapped
// chunks whole: its cost follows the mapped pages, not the capacity.
func (m *pageMap) each(fn func(i, v int32)) {
	for k, c := range m.chunks {
		if c == nil {
			continue
		}
		base := int32(k) << mapChunkShift
		for j, v := range c {
			if v != 0 {
				fn(base+int32(j), v-1)
			}
		}
	}
}

// clone copies m; unmapped chunks stay unallocated in the copy.
func (m *pageMap) clone() pageMap {
	c := pageMap{chunks: make([]*[mapChunk]int32, len(m.chunks)), used: append([]uint16(nil), m.used...),
		n: m.n, mapped: m.mapped}
	for k, ch := range m.chunks {
		if ch != nil {
			cp := *ch
			c.chunks[k] = &cp
		}
	}
	return c
}

// bytes is the memory the map holds.
func (m *pageMap) bytes() int64 {
	var chunks int64
	for _, u := range m.used {
		if u != 0 {
			chunks++
		}
	}
	return int64(len(m.chunks))*10 + chunks*mapChunk*4
}

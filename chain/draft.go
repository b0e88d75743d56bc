package chain

import (
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
)

// draftMemPages bounds the dirty pages a draft keeps in memory (64 MiB of
// 4 KiB pages), like a page cache; beyond it, pages are staged on the device
// (written and counted) until the commit.
const draftMemPages = 16384

// draft is the fallback content of a file being changed in any pattern
// other than sequential writes from the start: a base version (possibly a
// pending one), overlaid with dirty pages, resized by truncates. It is
// re-ingested sequentially at commit.
type draft struct {
	s        *Store
	ps       int64
	base     *Reader
	baseLive int64           // bytes of base still visible: a truncate below cuts it
	temp     *pendingVersion // base to discard after commit (an interrupted ingest)
	size     int64

	mem     map[int64][]byte     // dirty pages in memory
	staged  map[int64]stagedPage // dirty pages staged in the backend
	batches []storage.Location   // what staging wrote, given back at release

	truncated bool // for the shadow: cut below its committed size
	truncMin  int64
	rewritten int64 // for the shadow: bytes from 0 written before the draft began (a streamed prefix)
}

// stagedPage is page Page of staging batch Batch.
type stagedPage struct {
	batch int
	page  int64
}

// loc is where the page is kept.
func (d *draft) loc(sp stagedPage) storage.Location {
	return meta.SubExtents(d.batches[sp.batch], sp.page*d.ps/int64(d.s.blockSize), d.ps/int64(d.s.blockSize))
}

func newDraft(s *Store, base *Reader, temp *pendingVersion) *draft {
	d := &draft{s: s, ps: s.filePageSize(), base: base, temp: temp,
		mem: map[int64][]byte{}, staged: map[int64]stagedPage{}}
	if base != nil {
		d.size, d.baseLive = base.Size(), base.Size()
	}
	d.truncMin = d.size
	return d
}

// page returns page idx's current bytes; the caller may change them.
func (d *draft) page(idx int64) ([]byte, error) {
	if b, ok := d.mem[idx]; ok {
		return b, nil
	}
	buf := make([]byte, d.ps)
	if sp, ok := d.staged[idx]; ok {
		if err := d.s.data.ReadAt(d.batches[sp.batch], buf, sp.page*d.ps); err != nil {
			return nil, fmt.Errorf("read staged page %d: %w", idx, err)
		}
		return buf, nil
	}
	off := idx * d.ps
	if d.base != nil && off < d.baseLive {
		n := min(d.ps, d.baseLive-off)
		if _, err := d.base.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			return nil, err
		}
	}
	return buf, nil
}

// WriteAt writes p at off, growing the file as needed.
func (d *draft) WriteAt(p []byte, off int64) (int, error) {
	written := 0
	for len(p) > 0 {
		idx, in := off/d.ps, off%d.ps
		n := min(int64(len(p)), d.ps-in)
		var pg []byte
		if in == 0 && n == d.ps {
			pg = make([]byte, d.ps)
		} else {
			var err error
			if pg, err = d.page(idx); err != nil {
				return written, err
			}
		}
		copy(pg[in:], p[:n])
		if err := d.setPage(idx, pg); err != nil {
			return written, err
		}
		p = p[n:]
		off += n
		written += int(n)
		d.size = max(d.size, off)
	}
	return written, nil
}

func (d *draft) setPage(idx int64, pg []byte) error {
	if _, ok := d.mem[idx]; !ok {
		d.s.dirty.add(d.ps)
	}
	d.mem[idx] = pg
	if sp, ok := d.staged[idx]; ok {
		d.unstage(idx, sp)
	}
	// Bounded per draft, and for all writers together.
	if len(d.mem) > draftMemPages || d.s.dirty.over() {
		return d.spill(max(1, len(d.mem)/2))
	}
	return nil
}

// dropMem forgets in-memory page idx.
func (d *draft) dropMem(idx int64) {
	if _, ok := d.mem[idx]; ok {
		delete(d.mem, idx)
		d.s.dirty.add(-d.ps)
	}
}

// spill stages n in-memory pages on the device.
func (d *draft) spill(n int) error {
	idxs := make([]int64, 0, len(d.mem))
	for idx := range d.mem {
		idxs = append(idxs, idx)
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	idxs = idxs[:n]
	buf := make([]byte, 0, int64(n)*d.ps)
	for _, idx := range idxs {
		buf = append(buf, d.mem[idx]...)
	}
	loc, err := d.s.data.Write(buf)
	if err != nil {
		return fmt.Errorf("stage draft pages: %w", err)
	}
	d.batches = append(d.batches, loc)
	for i, idx := range idxs {
		d.staged[idx] = stagedPage{batch: len(d.batches) - 1, page: int64(i)}
		d.dropMem(idx)
	}
	return nil
}

// unstage forgets a staged page (its space is given back with the draft;
// a backend that can discards its content now).
func (d *draft) unstage(idx int64, sp stagedPage) {
	delete(d.staged, idx)
	if dis, ok := d.s.data.(storage.Discarder); ok {
		dis.Discard(d.loc(sp))
	}
}

// ReadAt reads the draft's current content.
func (d *draft) ReadAt(p []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off < d.size {
		idx, in := off/d.ps, off%d.ps
		pg, err := d.page(idx)
		if err != nil {
			return n, err
		}
		k := copy(p[n:], pg[in:min(d.ps, in+d.size-off)])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Truncate sets the size. Bytes past a shrink are gone for good: growing
// again shows zeros.
func (d *draft) Truncate(size int64) error {
	if size < d.size {
		lastKept := (size + d.ps - 1) / d.ps // pages [0, lastKept) stay
		for idx := range d.mem {
			if idx >= lastKept {
				d.dropMem(idx)
			}
		}
		for idx, sp := range d.staged {
			if idx >= lastKept {
				d.unstage(idx, sp)
			}
		}
		if in := size % d.ps; in != 0 {
			pg, err := d.page(size / d.ps)
			if err != nil {
				return err
			}
			clear(pg[in:])
			if err := d.setPage(size/d.ps, pg); err != nil {
				return err
			}
		}
		d.baseLive = min(d.baseLive, size)
		d.truncated = true
		d.truncMin = min(d.truncMin, size)
	}
	d.size = size
	return nil
}

// dirtyPages lists the pages written into the draft, in order.
func (d *draft) dirtyPages() []int64 {
	idxs := make([]int64, 0, len(d.mem)+len(d.staged))
	for idx := range d.mem {
		idxs = append(idxs, idx)
	}
	for idx := range d.staged {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	return idxs
}

// nextData returns the first offset at or after off whose bytes may not be
// zeros (d.size if none): a dirty page, or base content that is not a chunk
// of zeros. dirty is dirtyPages().
func (d *draft) nextData(off int64, dirty []int64) (int64, error) {
	i := sort.Search(len(dirty), func(i int) bool { return (dirty[i]+1)*d.ps > off })
	nextDirty := d.size
	if i < len(dirty) {
		nextDirty = min(d.size, max(off, dirty[i]*d.ps))
	}
	// Up to the next dirty page, the bytes are the base's (zeros past
	// baseLive): skip its chunks of zeros.
	for off < nextDirty && off < d.baseLive {
		end, err := d.base.zerosEnd(off)
		if err != nil || end == off {
			return off, err
		}
		off = end
	}
	return nextDirty, nil
}

// shadowChange is what a plain filesystem would write for this draft.
func (d *draft) shadowChange() wear.Change {
	idxs := make([]int64, 0, len(d.mem)+len(d.staged))
	for idx := range d.mem {
		idxs = append(idxs, idx)
	}
	for idx := range d.staged {
		idxs = append(idxs, idx)
	}
	for idx := int64(0); idx*d.ps < min(d.rewritten, d.size); idx++ {
		if _, ok := d.mem[idx]; !ok {
			if _, ok := d.staged[idx]; !ok {
				idxs = append(idxs, idx)
			}
		}
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	c := wear.Change{Truncated: d.truncated, TruncSize: d.truncMin}
	for _, idx := range idxs {
		if n := len(c.Dirty); n > 0 && c.Dirty[n-1].First+c.Dirty[n-1].Count == idx {
			c.Dirty[n-1].Count++
		} else {
			c.Dirty = append(c.Dirty, wear.PageRange{First: idx, Count: 1})
		}
	}
	return c
}

// release gives back the staged pages and the temporary base.
func (d *draft) release() {
	for _, loc := range d.batches {
		d.s.data.Release(loc)
	}
	d.s.dirty.add(-int64(len(d.mem)) * d.ps)
	d.batches, d.staged, d.mem = nil, map[int64]stagedPage{}, map[int64][]byte{}
	if d.temp != nil {
		d.s.discard(d.temp)
		d.temp = nil
	}
}

package nandsim

import "fmt"

// blockState is where a block is in its program/erase cycle.
type blockState uint8

const (
	blockFree   blockState = iota // erased, on its die's free list
	blockOpen                     // a write frontier, being programmed in page order
	blockClosed                   // fully programmed, in a valid-count bucket: a GC candidate
)

// frontier is a write point: the open block and its next page.
// Host writes and GC copies have separate frontiers per die, so data that
// survived a GC (colder) is not mixed with fresh host data (hotter).
type frontier struct {
	block int32 // -1: none open
	next  int32 // next page index in block; == pagesPerBlock when full
}

// die is one chip: its own blocks, free list, frontiers and GC.
type die struct {
	free     blockList
	buckets  []blockList // closed blocks by valid-page count, 0..pagesPerBlock
	minValid int32       // no closed block of this die has fewer valid pages
	host, gc frontier
}

// counters are the workload statistics; Precondition resets them.
type counters struct {
	hostWritten, hostRead, programmed, gcCopied, gcRuns, erases, trimmed int64
}

// ftl is a page-mapped flash translation layer. Physical page ppn lives in
// block ppn/P at page ppn%P; block b belongs to die b/blocksPerDie; die d is
// chip d/Channels of channel d%Channels, so round-robin over dies strides
// over channels first. Maps are int32 (-1 = none): 4 bytes per logical plus
// 4 per physical page. The ftl is not safe for concurrent use; SSD locks it.
type ftl struct {
	cfg          Config
	pages        int32 // pages per block
	blocksPerDie int32
	nDies        int32
	nLogical     int32
	low, high    int32 // GC watermarks in free blocks per die

	l2p    pageMap // logical -> physical page
	p2l    pageMap // physical -> logical page (-1 = free or invalid)
	valid  []int32 // valid pages per block
	erases []uint32
	stamp  []int64 // tick of the block's last program or invalidation (cost-benefit age)
	state  []blockState
	prev   []int32 // list links, see blocklist.go
	next   []int32
	dies   []die

	nextDie int32 // round-robin striping cursor
	tick    int64 // host pages written over the device's life: the age clock
	ctr     counters
	clock   clocks

	// afterGC, when set, runs after every GC run (tests check invariants there).
	afterGC func() error
}

func newFTL(cfg Config) *ftl {
	nBlocks := int32(cfg.TotalBlocks())
	f := &ftl{
		cfg:          cfg,
		pages:        int32(cfg.PagesPerBlock),
		blocksPerDie: int32(cfg.BlocksPerChip),
		nDies:        int32(cfg.Dies()),
		nLogical:     int32(cfg.LogicalPages()),
		low:          cfg.lowBlocks(),
		high:         cfg.highBlocks(),
		l2p:          newPageMap(cfg.LogicalPages()),
		p2l:          newPageMap(cfg.PhysicalPages()),
		valid:        make([]int32, nBlocks),
		erases:       make([]uint32, nBlocks),
		stamp:        make([]int64, nBlocks),
		state:        make([]blockState, nBlocks),
		prev:         make([]int32, nBlocks),
		next:         make([]int32, nBlocks),
		dies:         make([]die, cfg.Dies()),
		clock:        newClocks(cfg),
	}
	for d := range f.dies {
		f.dies[d] = f.newDie()
		for i := int32(0); i < f.blocksPerDie; i++ {
			f.pushBack(&f.dies[d].free, int32(d)*f.blocksPerDie+i)
		}
	}
	return f
}

func (f *ftl) newDie() die {
	dd := die{
		free:     emptyList(),
		buckets:  make([]blockList, f.pages+1),
		minValid: f.pages,
		host:     frontier{block: -1},
		gc:       frontier{block: -1},
	}
	for i := range dd.buckets {
		dd.buckets[i] = emptyList()
	}
	return dd
}

func (f *ftl) dieOf(b int32) int32 { return b / f.blocksPerDie }

// write maps lpn to a fresh page, invalidating its previous copy. It is the
// host's write and Account path: it counts a host page and a program.
func (f *ftl) write(lpn int32) error {
	f.tick++
	if old := f.l2p.get(lpn); old >= 0 {
		f.invalidate(old)
		f.l2p.set(lpn, -1)
	}
	d, err := f.pickDie()
	if err != nil {
		return err
	}
	f.program(&f.dies[d].host, lpn)
	f.ctr.hostWritten++
	f.ctr.programmed++
	f.clock.hostWrite(d)
	return nil
}

// trim unmaps lpn; the page it occupied becomes invalid.
func (f *ftl) trim(lpn int32) {
	if old := f.l2p.get(lpn); old >= 0 {
		f.invalidate(old)
		f.l2p.set(lpn, -1)
	}
	f.ctr.trimmed++
}

// read charges the flash read of lpn, if it is mapped.
func (f *ftl) read(lpn int32) {
	f.ctr.hostRead++
	if ppn := f.l2p.get(lpn); ppn >= 0 {
		f.clock.hostRead(f.dieOf(ppn / f.pages))
	}
}

// pickDie returns the next die in round-robin order that can take a host
// page, running GC on it if needed. A die that cannot (its live data fills
// it) is skipped; Validate's spare-block minimum makes "none can" impossible.
func (f *ftl) pickDie() (int32, error) {
	for i := int32(0); i < f.nDies; i++ {
		d := (f.nextDie + i) % f.nDies
		ok, err := f.ensureHostSpace(d)
		if err != nil {
			return -1, err
		}
		if ok {
			f.nextDie = (d + 1) % f.nDies
			return d, nil
		}
	}
	return -1, fmt.Errorf("%w: no die has a free page (%d live pages)", ErrOutOfSpace, f.liveLogical())
}

// ensureHostSpace makes the host frontier of die d writable. A new block is
// taken only if one stays free afterwards: GC always needs somewhere to copy.
func (f *ftl) ensureHostSpace(d int32) (bool, error) {
	dd := &f.dies[d]
	if dd.host.block >= 0 && dd.host.next < f.pages {
		return true, nil
	}
	if dd.host.block >= 0 {
		f.closeBlock(dd.host.block)
		dd.host.block = -1
	}
	if dd.free.n <= f.low {
		if err := f.collect(d); err != nil {
			return false, err
		}
	}
	if dd.free.n < 2 {
		return false, nil
	}
	f.open(&dd.host, f.popFront(&dd.free))
	return true, nil
}

func (f *ftl) open(fr *frontier, b int32) {
	fr.block, fr.next = b, 0
	f.state[b] = blockOpen
}

// program writes lpn at the frontier, which must have room.
func (f *ftl) program(fr *frontier, lpn int32) {
	b := fr.block
	ppn := b*f.pages + fr.next
	fr.next++
	f.p2l.set(ppn, lpn)
	f.l2p.set(lpn, ppn)
	f.valid[b]++
	f.stamp[b] = f.tick
}

func (f *ftl) closeBlock(b int32) {
	dd := &f.dies[f.dieOf(b)]
	f.state[b] = blockClosed
	v := f.valid[b]
	f.pushBack(&dd.buckets[v], b)
	if v < dd.minValid {
		dd.minValid = v
	}
}

// invalidate marks ppn stale. A closed block moves one bucket down, to the
// tail: buckets stay ordered by stamp, which cost-benefit relies on.
func (f *ftl) invalidate(ppn int32) {
	b := ppn / f.pages
	f.p2l.set(ppn, -1)
	v := f.valid[b]
	f.valid[b] = v - 1
	f.stamp[b] = f.tick
	if f.state[b] == blockClosed {
		dd := &f.dies[f.dieOf(b)]
		f.unlink(&dd.buckets[v], b)
		f.pushBack(&dd.buckets[v-1], b)
		if v-1 < dd.minValid {
			dd.minValid = v - 1
		}
	}
}

func (f *ftl) liveLogical() int64 { return f.l2p.mapped }

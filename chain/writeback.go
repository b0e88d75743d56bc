package chain

import (
	"sync"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"golang.org/x/sys/unix"
)

// Write-back: a write in order at the end of a streaming file is copied into
// the writer's queue and returns; a feeder goroutine per writer ingests the
// queue (detection, chunking, encoding on the workers). A save thus runs at
// the speed of memory while the encoding keeps up behind it, as the page
// cache lets a plain filesystem's writes return before the disk has them.
// The bytes queued by all writers together are bounded (writeBackMemory);
// past the bound a write waits for the feeders (back-pressure), it never
// fails.

// DefaultWriteBackBytes is the default bound on queued bytes: a tenth of
// the machine's memory, like the kernel's dirty_background_ratio, at least
// 64 MiB and at most 16 GiB.
func DefaultWriteBackBytes() int64 {
	return min(max(PhysicalMemory()/10, 64<<20), 16<<30)
}

// PhysicalMemory is the machine's RAM in bytes (1 GiB if unknown).
func PhysicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// writeBackMemory counts the bytes queued for ingest by all writers.
type writeBackMemory struct {
	mu    sync.Mutex
	room  sync.Cond
	held  int64
	limit int64 // < 0: no queue, writes ingest inline
}

func (m *writeBackMemory) enabled() bool { return m.limit >= 0 }

// acquire claims n bytes, waiting while the queues are full. A claim
// larger than the bound waits for the queues to empty.
func (m *writeBackMemory) acquire(n int64) {
	m.mu.Lock()
	if m.room.L == nil {
		m.room.L = &m.mu
	}
	for m.held > 0 && m.held+n > m.limit {
		m.room.Wait()
	}
	m.held += n
	m.mu.Unlock()
}

// add claims (or, negative, gives back) n bytes whatever the bound.
func (m *writeBackMemory) add(n int64) {
	m.mu.Lock()
	m.held += n
	if n < 0 && m.room.L != nil {
		m.room.Broadcast()
	}
	m.mu.Unlock()
}

// committingFamilies tracks the writers committing, by family: a save
// that chooses its reference while the family's previous save is still
// being committed (behind a close, in the background) waits for it, or it
// would find no reference and store a baseline. A writer that chooses its
// reference during its own commit (a fallback's re-ingest) waits only for
// those that began committing before it, so that two never wait for each
// other.
type committingFamilies struct {
	mu     sync.Mutex
	done   sync.Cond
	seq    uint64
	byName map[string]map[*Writer]*commitEntry
}

// commitEntry is one commit under way: its order, and whether it runs (a
// commit begun for a file closed but not yet released is only queued, and
// nobody waits for it: it may wait for a slot that its waiters hold).
type commitEntry struct {
	seq     uint64
	running bool
}

func (c *committingFamilies) begin(family string, w *Writer) { c.add(family, w, true) }

// queue registers a commit that does not run yet (run starts it).
func (c *committingFamilies) queue(family string, w *Writer) { c.add(family, w, false) }

func (c *committingFamilies) add(family string, w *Writer, running bool) {
	c.mu.Lock()
	if c.byName == nil {
		c.byName, c.done.L = map[string]map[*Writer]*commitEntry{}, &c.mu
	}
	if c.byName[family] == nil {
		c.byName[family] = map[*Writer]*commitEntry{}
	}
	c.seq++
	c.byName[family][w] = &commitEntry{seq: c.seq, running: running}
	c.mu.Unlock()
}

// run starts a queued commit, under family now (a rename since it was
// queued moves it), keeping its place in the order.
func (c *committingFamilies) run(from, to string, w *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byName[from][w]
	if e == nil {
		return
	}
	e.running = true
	if from != to {
		delete(c.byName[from], w)
		if len(c.byName[from]) == 0 {
			delete(c.byName, from)
		}
		if c.byName[to] == nil {
			c.byName[to] = map[*Writer]*commitEntry{}
		}
		c.byName[to][w] = e
	}
}

func (c *committingFamilies) end(family string, w *Writer) {
	c.mu.Lock()
	delete(c.byName[family], w)
	if len(c.byName[family]) == 0 {
		delete(c.byName, family)
	}
	c.done.Broadcast()
	c.mu.Unlock()
}

// earlier reports whether w's commit e runs and began before self (every
// running one does, if self is not committing).
func (c *committingFamilies) earlier(w *Writer, e *commitEntry, self *Writer) bool {
	if w == self || !e.running {
		return false
	}
	for _, m := range c.byName {
		if mine, ok := m[self]; ok {
			return e.seq < mine.seq
		}
	}
	return true
}

// others reports whether a writer that began committing before self, of
// any family, still commits.
func (c *committingFamilies) others(self *Writer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.byName {
		for w, e := range m {
			if c.earlier(w, e, self) {
				return true
			}
		}
	}
	return false
}

// waitAll returns once no writer that began committing before self, of
// any family, still commits.
func (c *committingFamilies) waitAll(self *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		pending := false
		for _, m := range c.byName {
			for w, e := range m {
				pending = pending || c.earlier(w, e, self)
			}
		}
		if !pending {
			return
		}
		c.done.Wait()
	}
}

// wait returns once no writer that began committing into family before
// self (every one, if self is not committing) still commits.
func (c *committingFamilies) wait(family string, self *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		earlier := false
		for w, e := range c.byName[family] {
			earlier = earlier || c.earlier(w, e, self)
		}
		if !earlier {
			return
		}
		c.done.Wait()
	}
}

// QueuedBytes is the memory held now by bytes accepted and not yet ingested.
func (s *Store) QueuedBytes() int64 {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	return s.wb.held
}

// push hands b, which the writer owns, to the ingest: to the queue, or
// inline when write-back is off. Call with w.mu held.
func (w *Writer) push(b []byte) error {
	if !w.s.wb.enabled() {
		return w.ingest.Write(b)
	}
	w.queue = append(w.queue, b)
	w.queued += int64(len(b))
	if !w.feeding {
		w.feeding = true
		go w.feed()
	}
	return nil
}

// feed ingests the queue until it is empty. An ingest error stops it; the
// bytes still queued are dropped and the error is the writer's from then
// on (the next write, and the commit, return it).
func (w *Writer) feed() {
	defer w.s.lowerPriority()()
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) > 0 {
		b := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		if w.feedErr == nil && !w.dropQueue {
			in := w.ingest
			w.mu.Unlock()
			err := in.Write(b)
			w.mu.Lock()
			if err != nil && w.feedErr == nil {
				w.feedErr = err
			}
		}
		w.queued -= int64(len(b))
		w.s.wb.add(-int64(len(b)))
		bufpool.Put(b)
	}
	w.queue = nil
	w.feeding = false
	w.idle.Broadcast()
}

// settleQueue waits until the feeder has ingested (or, with drop, dropped)
// everything queued, and returns the ingest's error if it failed. Call
// with w.mu held; it is released while waiting.
func (w *Writer) settleQueue(drop bool) error {
	if drop {
		w.dropQueue = true
	}
	for w.feeding {
		w.idle.Wait()
	}
	w.dropQueue = false
	return w.feedErr
}

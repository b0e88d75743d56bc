package chain

import "sync"

// committingFamilies tracks the writers committing, by family: a save
// that chooses its reference while the family's previous save is still
// being committed (behind a close, in the background) waits for it, or it
// would find no reference and store a baseline. A writer that chooses its
// reference during its own commit (a staged save: FileCommit.Run) waits
// only for those that began committing before it, so that two never wait
// for each other.
//
// Thousands of commits may be queued (small files closed faster than they
// are encoded) while a few run: the waits look at the running ones only,
// so that a commit's cost does not grow with the queue behind it.
type committingFamilies struct {
	mu      sync.Mutex
	done    sync.Cond
	seq     uint64
	entries map[*Writer]*commitEntry // queued or running
	running map[*Writer]*commitEntry
}

// commitEntry is one commit under way: its order, its family, and whether
// it runs (a commit begun for a file closed but not yet released is only
// queued, and nobody waits for it: it may wait for a slot that its waiters
// hold).
type commitEntry struct {
	seq     uint64
	family  string
	running bool
}

func (c *committingFamilies) begin(family string, w *Writer) { c.add(family, w, true) }

// queue registers a commit that does not run yet (run starts it).
func (c *committingFamilies) queue(family string, w *Writer) { c.add(family, w, false) }

func (c *committingFamilies) add(family string, w *Writer, running bool) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries, c.running, c.done.L = map[*Writer]*commitEntry{}, map[*Writer]*commitEntry{}, &c.mu
	}
	c.seq++
	e := &commitEntry{seq: c.seq, family: family, running: running}
	c.entries[w] = e
	if running {
		c.running[w] = e
	}
	c.mu.Unlock()
}

// run starts a queued commit, under family now (a rename since it was
// queued moves it), keeping its place in the order.
func (c *committingFamilies) run(from, to string, w *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[w]
	if e == nil {
		return
	}
	e.running, e.family = true, to
	c.running[w] = e
}

func (c *committingFamilies) end(family string, w *Writer) {
	c.mu.Lock()
	delete(c.entries, w)
	delete(c.running, w)
	c.done.Broadcast()
	c.mu.Unlock()
}

// earlier reports whether w's commit e runs and began before self (every
// running one does, if self is not committing).
func (c *committingFamilies) earlier(w *Writer, e *commitEntry, self *Writer) bool {
	if w == self || !e.running {
		return false
	}
	if mine, ok := c.entries[self]; ok {
		return e.seq < mine.seq
	}
	return true
}

// others reports whether a writer that began committing before self, of
// any family, still commits.
func (c *committingFamilies) others(self *Writer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningEarlier("", self)
}

// runningEarlier reports whether a commit of family ("": any) that began
// before self still runs. Call with c.mu held.
func (c *committingFamilies) runningEarlier(family string, self *Writer) bool {
	for w, e := range c.running {
		if (family == "" || e.family == family) && c.earlier(w, e, self) {
			return true
		}
	}
	return false
}

// waitAll returns once no writer that began committing before self, of
// any family, still commits.
func (c *committingFamilies) waitAll(self *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.runningEarlier("", self) {
		c.done.Wait()
	}
}

// wait returns once no writer that began committing into family before
// self (every one, if self is not committing) still commits.
func (c *committingFamilies) wait(family string, self *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.runningEarlier(family, self) {
		c.done.Wait()
	}
}

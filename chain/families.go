package chain

import "sync"

// committingFamilies tracks the writers committing, by family: a save
// that chooses its reference while the family's previous save is still
// being committed (behind a close, in the background) waits for it, or it
// would find no reference and store a baseline. A writer that chooses its
// reference during its own commit (a staged save: FileCommit.Run) waits
// only for those that began committing before it, so that two never wait
// for each other.
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

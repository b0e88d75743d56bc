// Package save holds the life of one file's save, from the first change
// to its staging file to its commit and the end of the staging file, as
// one State with named transitions. fs asks it what to do and does it:
// FUSE semantics, the staging file itself and the store stay in fs.
//
// The phases, and what moves a file between them:
//
//	Clean      --Change, Staged(true)-->             Changed
//	Changed    --Queue (last writer's close)-->      Queued
//	Queued     --Release, Begin(settle=false)-->     Committing
//	Queued     --Release, Begin(settle=true)-->      Settling   (a hot file)
//	Settling   --Commit.Settled-->                   Committing, or Skip (taken over, deleted)
//	Committing --Land-->                             Clean (or Changed: a writer opened since)
//	Committing --Keep (failure the writer can't see)--> Kept
//	(mount)    --Adopt (a save a killed daemon left)--> Kept
//	Kept       --Retried, KeepEnded-->               Clean
//
// A kept save and an adopted one are the same state: the staging file is
// the file's content, marked closed on the host, and a later try commits
// it. A State has no lock of its own: its owner (fs's openFile) calls every
// method with its mutex held.
package save

import (
	"github.com/ckptfs/ckptfs/chain"
)

// Phase names where a file's save is.
type Phase int

const (
	// Clean: nothing staged differs from the committed content.
	Clean Phase = iota
	// Changed: the staging file may differ from the committed content.
	Changed
	// Queued: the last writer closed the file; its commit holds its place
	// in the encoding order until the release comes.
	Queued
	// Settling: the commit waits for a file appended to in quick
	// succession to settle.
	Settling
	// Committing: the commit runs in the background.
	Committing
	// Kept: a commit failed for a reason the writer could not see (no room
	// on the host, an error of the store), or a daemon killed before the
	// commit left the save: the staging file is the file's content, and a
	// later try commits it.
	Kept
)

func (p Phase) String() string {
	switch p {
	case Clean:
		return "clean"
	case Changed:
		return "changed"
	case Queued:
		return "queued"
	case Settling:
		return "settling"
	case Committing:
		return "committing"
	case Kept:
		return "kept"
	}
	return "unknown"
}

// Ticket is a commit queued at the close of the last writer and run after
// its release, in the order of the tickets (fs's encodeQueue).
type Ticket struct {
	N      uint64
	Commit *chain.FileCommit
}

// State is the save of one inode.
type State struct {
	changed bool
	queued  *Ticket
	// hot: a writer opened the file to append to while its previous
	// commit ran or had just landed; its next commit settles first.
	hot     bool
	running *Commit
	// renamed: the file was renamed while its commit ran; the commit's
	// content moves to the new name's series once it lands.
	renamed bool
	// failure is the error of a commit that failed, which the next fsync
	// or close reports.
	failure error
	// kept counts the goroutines that keep the save for a later commit.
	kept int
	// closedWriters counts the writer handles closed whose release has
	// not come yet.
	closedWriters int
}

// Phase is where the save is now.
func (s *State) Phase() Phase {
	switch {
	case s.running != nil && s.running.settling:
		return Settling
	case s.running != nil:
		return Committing
	case s.kept > 0:
		return Kept
	case s.queued != nil:
		return Queued
	case s.changed:
		return Changed
	}
	return Clean
}

// Changes to the staged content.

// Staged starts a new staging file: changed if it does not hold the
// committed content (a truncating open).
func (s *State) Staged(changed bool) { s.changed = changed }

// Change notes a change to the staged content (a write, a truncate, a
// passthrough handle's open: its writes never reach the daemon).
func (s *State) Change() { s.changed = true }

// Unchanged notes that the staged content no longer counts as a change:
// it is what the inode holds (a new empty file), or its save was refused
// at close and the refusal reported (the previous content stays).
func (s *State) Unchanged() { s.changed = false }

// CommittedNow notes a commit made in the caller's request (fsync, a
// closed save secured before another writer changes it): the staged
// content is the committed one, unless more may come (a passthrough
// handle writes on unseen, or only a prefix was committed).
func (s *State) CommittedNow(more bool) { s.changed = more }

// Ended notes that the staging file ended (committed, retired, dropped).
func (s *State) Ended() { s.changed = false }

// IsChanged reports whether the staged content may differ from the
// committed one.
func (s *State) IsChanged() bool { return s.changed }

// Writers.

// WriterOpened notes the open of a writer; appending: it only appends,
// recentlyLanded: the file's last commit landed a moment ago. A writer
// that appends to a file whose commit runs or just landed makes it hot,
// and takes over the staging file of a commit that settles, which then
// does not run. Call it before waiting for the running commit, which
// would cut the settling short.
func (s *State) WriterOpened(appending, recentlyLanded bool) {
	if !appending {
		return
	}
	if c := s.running; c != nil {
		s.hot = true
		if c.settling {
			c.takenOver = true
			c.WakeUp()
		}
		return
	}
	if recentlyLanded {
		s.hot = true
	}
}

// WriterClosed notes the close of a writer handle whose release is to come.
func (s *State) WriterClosed() { s.closedWriters++ }

// WriterReleased notes the release of a writer handle counted by WriterClosed.
func (s *State) WriterReleased() { s.closedWriters-- }

// ClosedWriters is the number of writer handles closed and not released.
func (s *State) ClosedWriters() int { return s.closedWriters }

// WaitsForRelease reports whether the save was closed (closedMarked: its
// staging file is marked closed) or a writer's close came before its
// release, and no commit has started or keeps it: Drain waits for that
// release.
func (s *State) WaitsForRelease(closedMarked bool) bool {
	return s.running == nil && s.kept == 0 && (closedMarked || s.closedWriters > 0)
}

// The commit.

// Queue records t, the commit queued at the last writer's close.
func (s *State) Queue(t *Ticket) { s.queued = t }

// QueuedTicket is the commit queued, or nil.
func (s *State) QueuedTicket() *Ticket { return s.queued }

// Release takes the queued commit and whether the file is hot, at the
// release of the last writer, which decides what becomes of the save.
func (s *State) Release() (t *Ticket, hot bool) {
	t, hot = s.queued, s.hot
	s.queued, s.hot = nil, false
	return t, hot
}

// Begin starts the background commit; settle: it waits for the file to
// settle first.
func (s *State) Begin(settle bool) *Commit {
	c := &Commit{done: make(chan struct{})}
	if settle {
		c.settling, c.wake = true, make(chan struct{})
	}
	s.running = c
	return c
}

// Running is the background commit, or nil.
func (s *State) Running() *Commit { return s.running }

// Rename notes a rename of the file; it reports whether a commit runs,
// whose content then moves to the new name's series once it lands.
func (s *State) Rename() bool {
	if s.running != nil {
		s.renamed = true
	}
	return s.running != nil
}

// Land ends c, the background commit, with err: the save is committed, or
// failed for good (the previous content stays, and the next fsync or close
// reports err). It reports whether the file was renamed meanwhile.
func (s *State) Land(c *Commit, err error) (renamed bool) {
	if err != nil {
		s.failure = err
	}
	renamed = s.renamed
	s.renamed = false
	s.end(c)
	return renamed
}

// Skip ends c, a commit that does not run: a writer took the staging file
// over, the file was deleted, or (failure) it could not be queued.
func (s *State) Skip(c *Commit, failure error) {
	if failure != nil {
		s.failure = failure
	}
	s.end(c)
}

// Keep ends c, a commit that failed for a reason the writer could not see:
// the save is kept for a later try. failure, if not nil, is reported by
// the next fsync or close (a full host is not: the save is only waiting).
func (s *State) Keep(c *Commit, failure error) {
	if failure != nil {
		s.failure = failure
	}
	s.kept++
	s.end(c)
}

func (s *State) end(c *Commit) {
	if s.running == c {
		s.running = nil
	}
	close(c.done)
}

// Fail records a failure the next fsync or close reports (a commit that
// could not be queued, a kept save's later try that failed).
func (s *State) Fail(err error) { s.failure = err }

// TakeFailure returns the failure to report, once.
func (s *State) TakeFailure() error {
	err := s.failure
	s.failure = nil
	return err
}

// Kept and adopted saves.

// Adopt takes over a save a killed daemon left closed in its staging file
// and the store's open could not commit: it is kept, as at run time.
func (s *State) Adopt() {
	s.changed = true
	s.kept++
}

// IsKept reports whether a kept save waits for a later try.
func (s *State) IsKept() bool { return s.kept > 0 }

// Retried notes the end of a kept save's later try: committed (err nil:
// the failure reported before is mended) or failed for good; either way it
// was committed under the file's name now.
func (s *State) Retried(err error) {
	if err == nil {
		s.failure = nil
	}
	s.renamed = false
}

// KeepEnded notes that a goroutine keeping the save let it go (committed,
// taken over by a writer, deleted, shutdown).
func (s *State) KeepEnded() { s.kept-- }

// Commit is a commit running in the background.
type Commit struct {
	done chan struct{}
	// settling: it waits for its file to settle until wake is closed
	// (woken) or its time comes; takenOver: a writer took the staging
	// file over meanwhile, and it does not run.
	settling, woken, takenOver bool
	wake                       chan struct{}
}

// Done is closed when the commit ended.
func (c *Commit) Done() <-chan struct{} { return c.done }

// Wake is closed when the settling is cut short (nil if it does not settle).
func (c *Commit) Wake() <-chan struct{} { return c.wake }

// WakeUp cuts the settling short, if the commit settles: it runs now, or
// not at all if a writer took it over. Call with the owner's lock held.
func (c *Commit) WakeUp() {
	if c.settling && !c.woken {
		c.woken = true
		close(c.wake)
	}
}

// Settled ends the settling; it reports whether a writer took the staging
// file over meanwhile (the commit then does not run). Call with the
// owner's lock held.
func (c *Commit) Settled() (takenOver bool) {
	c.settling = false
	return c.takenOver
}

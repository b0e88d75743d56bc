package fs

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/fs/save"
	"github.com/sirupsen/logrus"
)

// Commits in the background: the last writer's release hands the file's
// staging file to a goroutine that encodes and commits it (stagingfile.go), and
// close(2) returned long before, with the bytes in the kernel's page cache
// as on a plain filesystem. Whatever observes the committed content waits
// for the commit: a new writer, a truncate, the user.ckptfs.* attributes,
// fsync (which also reports a commit that failed), fsync of a directory and
// the report (which wait for every commit), unmount and SIGTERM (Drain).
// Reads meanwhile are served from the staging file. A daemon killed before
// the commit lands loses nothing: the staging file was marked closed at
// the last close, and the next open of the store ingests it.

// commitTracker counts the background commits of the whole filesystem.
type commitTracker struct {
	mu      sync.Mutex
	cond    sync.Cond
	running int
}

func (c *commitTracker) add(d int) {
	c.mu.Lock()
	if c.cond.L == nil {
		c.cond.L = &c.mu
	}
	c.running += d
	if c.running == 0 {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

// wait returns once no background commit runs.
func (c *commitTracker) wait() {
	c.mu.Lock()
	for c.running > 0 {
		if c.cond.L == nil {
			c.cond.L = &c.mu
		}
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// Drain waits for every background commit, and first for the releases of
// files closed by their last writer (the kernel sends a release after
// close returns; a mapping delays it until munmap, so this wait is
// bounded): the mount command calls it after the kernel let go of the
// mount and before it closes the store; fsync of a directory and the
// report wait so.
func (f *FS) Drain() {
	f.draining.Add(1)
	defer f.draining.Add(-1)
	f.wakeSettling()
	for deadline := time.Now().Add(releaseWait); f.open.closedUnreleased() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	f.commits.wait()
	f.forgets.wait(f) // the report counts the space they free
}

// maxEncoding bounds the staged files encoded at once. Each encodes on all
// the store's workers already; more at once would only add the memory of
// their chunks in flight. The others wait on disk, in their staging files.
const maxEncoding = 2

// encodeQueue orders the commits of staged files: each begins (a ticket)
// at the close of its last writer, in the writers' order, and runs after
// its release, maxEncoding at a time, in ticket order: a save waits for the
// earlier ones of its family that run (chain's committingFamilies), so the
// order of the closes decides the deltas' chain, not the order in which
// the releases happen to be served. A ticket whose release has not come
// releaseWait after its close (a mapping holds the file) stops holding the
// later ones back.
//
// Waiting commits sleep until dispatch admits them: the queue is looked at
// when something changes (a release, a commit's end, an abort) or when a
// ticket that holds the others back grows stale, never by polling (each
// waiting commit polled every millisecond before, scanning every ticket:
// 20,000 small files closed in a row kept a core busy with hundreds of
// them).
type encodeQueue struct {
	mu      sync.Mutex
	issued  uint64                   // tickets handed out
	order   []uint64                 // begun tickets, in order; some admitted or aborted since
	waiting map[uint64]*queuedCommit // begun, not admitted
	running int
	timer   *time.Timer // runs dispatch when the ticket holding the others back grows stale
	timerAt time.Time
}

// queuedCommit is a begun ticket not yet admitted.
type queuedCommit struct {
	at    time.Time     // its begin (the close)
	ready bool          // its release came: it waits on admitted
	admit chan struct{} // closed when it may run
}

// begin runs start (which queues a commit in the store) and hands out the
// next ticket, atomically, so that tickets follow the order of the begins.
func (q *encodeQueue) begin(start func() (*chain.FileCommit, error)) (*save.Ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fc, err := start()
	if err != nil {
		return nil, err
	}
	if q.waiting == nil {
		q.waiting = map[uint64]*queuedCommit{}
	}
	t := q.issued
	q.issued++
	q.waiting[t] = &queuedCommit{at: time.Now(), admit: make(chan struct{})}
	q.order = append(q.order, t)
	return &save.Ticket{N: t, Commit: fc}, nil
}

// abort drops a begun commit that will not run.
func (q *encodeQueue) abort(bc *save.Ticket) {
	bc.Commit.Abort()
	q.mu.Lock()
	delete(q.waiting, bc.N)
	q.dispatch()
	q.mu.Unlock()
}

// admit waits until ticket t may run: a slot is free, and every earlier
// ticket was admitted, or is neither released nor recent.
func (q *encodeQueue) admit(t uint64) {
	q.mu.Lock()
	qc := q.waiting[t]
	if qc == nil { // not begun here: nothing to order it against
		q.running++
		q.mu.Unlock()
		return
	}
	qc.ready = true
	q.dispatch()
	q.mu.Unlock()
	<-qc.admit
}

// dispatch admits the tickets that may run now, in order, and arms the
// timer for the ticket that holds the later ones back, if any. Call with
// q.mu held.
func (q *encodeQueue) dispatch() {
	var holding time.Time
	kept := q.order[:0] // tickets admitted or aborted leave the order
	for i, t := range q.order {
		qc := q.waiting[t]
		if qc == nil {
			continue
		}
		if q.running >= maxEncoding {
			kept = append(kept, q.order[i:]...)
			break
		}
		if qc.ready {
			delete(q.waiting, t)
			q.running++
			close(qc.admit)
			continue
		}
		kept = append(kept, t)
		if time.Since(qc.at) < releaseWait { // its release may still come
			holding = qc.at.Add(releaseWait)
			kept = append(kept, q.order[i+1:]...)
			break
		}
	}
	q.order = kept
	if !holding.IsZero() && (q.timer == nil || !q.timerAt.Equal(holding)) {
		if q.timer != nil {
			q.timer.Stop()
		}
		q.timerAt = holding
		q.timer = time.AfterFunc(time.Until(holding), func() {
			q.mu.Lock()
			q.dispatch()
			q.mu.Unlock()
		})
	}
}

// leave frees the slot of an admitted commit.
func (q *encodeQueue) leave() {
	q.mu.Lock()
	q.running--
	q.dispatch()
	q.mu.Unlock()
}

// smallFileMax is the size up to which a file's blocks (st_blocks) count
// its logical size even once committed: its attributes are then the same
// before and after its commit, which lands after close returned, so stat
// never sees a small file change. Larger files count the bytes the store
// keeps once committed (du of a mount shows what checkpoints cost).
const smallFileMax = 256 << 10

// beginCommit queues the commit of of's staged content at the close of its
// last writer (Flush), unless one is queued already. Call with of.mu held.
func (n *Node) beginCommit(of *openFile) {
	if of.save.QueuedTicket() != nil {
		return
	}
	bc, err := n.fsys.encoding.begin(func() (*chain.FileCommit, error) {
		return n.fsys.store.BeginCommitFile(n.ino, n.path())
	})
	if err != nil {
		logrus.WithError(err).Warnf("queue the commit of %s", n.path())
		return
	}
	of.save.Queue(bc)
}

// startCommit runs at the release of the inode's last writer: the staging
// file is committed in the background, or retired if there is nothing to
// commit (never written, or its file was unlinked and no handle is left to
// read it). It reports whether it started a commit, which then holds the
// inode's state until it lands (openTable.release). Call with of.mu held.
func (n *Node) startCommit(of *openFile, others int) bool {
	if of.save.Running() != nil {
		// Another writer's release, between this one's count and its
		// turn, started the commit of the same staging file; a writer
		// opened since waits for it (stageForWrite), so nothing is left
		// uncommitted.
		return false
	}
	sf := of.stage
	bc, hot := of.save.Release()
	if sf == nil {
		if bc != nil {
			n.fsys.encoding.abort(bc)
		}
		return false
	}
	f := n.fsys
	in, err := f.names.Inode(n.ino)
	if !of.save.IsChanged() || err != nil || in.Nlink == 0 && others == 0 {
		if bc != nil {
			f.encoding.abort(bc)
		}
		of.endStage(f, n.ino, sf)
		return false
	}
	sf.noteClosed()
	if err := sf.Mark(staging.Closed); err != nil {
		logrus.WithError(err).Warnf("%s: a crash before its commit loses it", n.path())
	}
	if bc == nil {
		n.beginCommit(of)
		if bc, _ = of.save.Release(); bc == nil { // take the ticket just queued
			of.save.Fail(fmt.Errorf("commit %s: could not queue it", n.path()))
			of.endStage(f, n.ino, sf)
			return false
		}
	}
	size, _, _ := sf.attr()
	appended := sf.appended()
	settling := hot && !f.SyncClose && f.draining.Load() == 0
	pc := of.save.Begin(settling)
	passthrough := of.passthrough > 0
	f.commits.add(1)
	f.stagedBytes.Add(size)
	f.stagedClosed(sf) // past the background limit, the host writes back
	go func() {
		defer f.stagedBytes.Add(-size)
		if settling {
			// Its ticket would hold the other files' commits back while
			// it settles: it takes a new one after.
			f.encoding.abort(bc)
			end, qerr := n.settle(of, pc, sf), error(nil)
			if bc = nil; end == settled {
				bc, qerr = f.encoding.begin(func() (*chain.FileCommit, error) {
					return f.store.BeginCommitFile(n.ino, n.path())
				})
			}
			if bc == nil {
				n.endSettled(of, pc, sf, end, qerr)
				return
			}
		}
		err := n.encodeStaged(sf, bc, appended)
		if keepStaged(err) {
			// The save stays in its staging file, the file's content,
			// and is committed later (hostspace.go).
			var failure error // reported by the next fsync or close
			if !chain.HostFull(err) {
				failure = err
			}
			of.mu.Lock()
			of.save.Keep(pc, failure) // waiters go on with the staged content
			of.mu.Unlock()
			// A kept save holds back no drain.
			f.commitLater(n.ino, of, sf, err, func() { f.commits.add(-1) })
			return
		}
		f.chargeStagedIfDue(sf) // dirty past the expiry: the host wrote it back
		of.mu.Lock()
		if err == nil {
			sf.committed = true
			f.recent.landed(n.ino)
		}
		of.endStage(f, n.ino, sf)
		renamed := of.save.Land(pc, err)
		of.mu.Unlock()
		if err != nil {
			logrus.WithError(err).Errorf("commit %s after close: its previous content stays", n.path())
		}
		if err != nil || passthrough {
			// The kernel's cached pages may hold bytes that were never
			// committed, or predate writes it served from the staging file.
			f.markStale(n.ino)
			n.NotifyContent(0, 0)
		}
		if renamed && err == nil {
			n.adopt()
		}
		n.release(of, false)
		f.commits.add(-1)
	}()
	return true
}

// endSettled ends the commit pc of sf, which settled with end and does not
// run: a writer took the staging file over (it is the file's content
// still), the file was deleted, or the commit could not be queued (err).
func (n *Node) endSettled(of *openFile, pc *save.Commit, sf *stagedFile, end settleEnd, err error) {
	f := n.fsys
	var failure error
	of.mu.Lock()
	switch end {
	case dropped:
		of.endStage(f, n.ino, sf)
	case settled:
		failure = fmt.Errorf("commit %s: could not queue it: %w", n.path(), err)
		of.endStage(f, n.ino, sf)
		logrus.WithError(err).Errorf("commit %s after close: its previous content stays", n.path())
	}
	of.save.Skip(pc, failure)
	of.mu.Unlock()
	n.release(of, false)
	f.commits.add(-1)
}

// encodeStaged runs bc, the commit of sf, in its turn; appended: see
// stagedFile.appended.
func (n *Node) encodeStaged(sf *stagedFile, bc *save.Ticket, appended int64) error {
	f := n.fsys
	f.encoding.admit(bc.N)
	defer f.encoding.leave()
	if sf.committed && n.unchangedSinceCommit(sf) {
		bc.Commit.Abort() // committed at fsync, and not written since
		return nil
	}
	if appended >= 0 {
		bc.Commit.Appended(appended)
	}
	// The family is decided here, once, by the name the file has now.
	mtime := stagedMtime(sf)
	err := sf.use(func(file *os.File) error { return bc.Commit.Run(file, n.path(), mtime) })
	if err == errGone {
		bc.Commit.Abort()
	}
	return err
}

// waitCommit waits for the background commit of of, if any. Call with
// of.mu held; it is released while waiting.
func (of *openFile) waitCommit() {
	for of.save.Running() != nil {
		pc := of.save.Running()
		pc.WakeUp() // a commit waiting for its file to settle runs now
		of.mu.Unlock()
		<-pc.Done()
		of.mu.Lock()
	}
}

// waitCommitOf waits for the background commit of inode ino, if any.
func (n *Node) waitCommitOf() {
	if of := n.fsys.open.get(n.ino); of != nil {
		of.mu.Lock()
		of.waitCommit()
		of.mu.Unlock()
	}
}

// waitClosedCommit waits for the commit of a file its last writer closed,
// the release that starts it first (for up to releaseWait: a mapping holds
// the release back until munmap).
func (n *Node) waitClosedCommit() {
	of := n.fsys.open.get(n.ino)
	if of == nil {
		return
	}
	for deadline := time.Now().Add(releaseWait); of.closedUnreleased() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	of.mu.Lock()
	of.waitCommit()
	of.mu.Unlock()
}

// releaseWait bounds the wait for the release that follows a last close.
const releaseWait = time.Second

// closedUnreleased reports whether of's staging file was closed by its
// last writer, or a writer's close came before its release, and its commit
// has not started.
func (of *openFile) closedUnreleased() bool {
	of.mu.Lock()
	defer of.mu.Unlock()
	return of.stage != nil && of.save.WaitsForRelease(of.stage.State() == staging.Closed)
}

// adopt moves the file's committed content into the series of the name it
// has now (after a rename).
func (n *Node) adopt() {
	if err := n.fsys.store.Adopt(n.ino, n.path()); err != nil {
		logrus.WithError(err).Warnf("rename: series of %s not updated", n.path())
	}
}

// runningCommits is the number of background commits now.
func (f *FS) runningCommits() int {
	f.commits.mu.Lock()
	defer f.commits.mu.Unlock()
	return f.commits.running
}

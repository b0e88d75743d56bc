package fs

import (
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"
)

// Write-back at close: close(2) hands the file's writer to a goroutine
// that finishes the ingest and commits, and returns once ckptfs holds the
// bytes (the writer's write-back queue, chain/writeback.go), as a plain
// filesystem's close returns with the bytes in the page cache. Whatever
// observes the content waits for the commit: reads, a new writer, a
// truncate, the user.ckptfs.* attributes, fsync (which also reports a
// commit that failed), fsync of a directory and the report (which wait for
// every commit), unmount and SIGTERM (Drain). A daemon killed before the
// commit lands loses that file's new content, never the previous one: a
// commit is one transaction (docs/ARCHITECTURE.md, crash semantics).

// pendingCommit is a commit running in the background.
type pendingCommit struct {
	done chan struct{}
	err  error
}

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
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// runningCommits is the number of background commits now.
func (f *FS) runningCommits() int {
	f.commits.mu.Lock()
	defer f.commits.mu.Unlock()
	return f.commits.running
}

// Drain waits for every background commit: the mount command calls it
// after the kernel let go of the mount and before it closes the store.
func (f *FS) Drain() { f.commits.wait() }

// syncCloseMax is the size up to which a file commits before close
// returns: its commit takes no time, and stat then never sees its
// allocated blocks change after close (they count the logical size until
// the commit, the stored size after).
const syncCloseMax = 1 << 20

// closeCommitsNow reports whether close commits before it returns: with
// SyncClose, for a small file, and for a file that took the fallback, whose
// commit re-ingests its draft and may fail for want of space that its
// writes did not reserve (close then reports it, and the previous content
// stays).
func (n *Node) closeCommitsNow(of *openFile) bool {
	return n.fsys.SyncClose || of.writer.Size() <= syncCloseMax || !of.writer.Streamed()
}

// commitClose commits at close: in the background, or before returning
// (closeCommitsNow). Call with of.mu held.
func (n *Node) commitClose(of *openFile) syscall.Errno {
	if of.writer == nil {
		return 0
	}
	if n.closeCommitsNow(of) {
		return n.commit(of)
	}
	w := of.writer
	of.writer, of.reader = nil, nil
	pc := &pendingCommit{done: make(chan struct{})}
	of.pending = pc
	n.fsys.open.hold(n.ino, of) // the inode lives until the commit lands
	n.fsys.commits.add(1)
	committed := w.CommitInBackground()
	go func() {
		err := <-committed
		of.mu.Lock()
		pc.err = err
		of.pending = nil
		if err != nil {
			of.failed = err
		}
		// The size stat reports is the inode's again.
		of.size.Store(-1)
		close(pc.done)
		of.mu.Unlock()
		if err != nil {
			logrus.WithError(err).Errorf("commit %s after close: its previous content stays", n.path())
			n.fsys.markStale(n.ino)
			n.NotifyContent(0, 0)
		}
		n.release(of, false)
		n.fsys.commits.add(-1)
	}()
	return 0
}

// waitCommit waits for the background commit of of, if any. Call with
// of.mu held; it is released while waiting.
func (of *openFile) waitCommit() {
	for of.pending != nil {
		pc := of.pending
		of.mu.Unlock()
		<-pc.done
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

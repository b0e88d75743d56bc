package fs

import (
	"sync"
	"syscall"

	"github.com/ckptfs/ckptfs/chain"
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

// maxBackgroundCommits bounds the commits running in the background. Past
// it a close commits before it returns, so that a program that closes files
// faster than they commit (a save of thousands of small files) meets
// back-pressure instead of a backlog that grows in memory.
const maxBackgroundCommits = 64

// closeCommitsNow reports whether close commits before it returns: with
// SyncClose, when maxBackgroundCommits already run, and for a file that
// took the fallback, whose commit re-ingests its draft and may fail for
// want of space that its writes did not reserve (close then reports it,
// and the previous content stays). Small files commit in the background
// too: a commit is a synced metadata transaction (1 to 7 ms on our test
// machine's disk), which a Hugging Face Trainer save paid at every close
// of its config, scheduler and RNG-state files.
func (n *Node) closeCommitsNow(of *openFile) bool {
	return n.fsys.SyncClose || !of.writer.Streamed() || n.fsys.runningCommits() >= maxBackgroundCommits
}

// statWaitMax is the size up to which stat and lookup wait for a file's
// background commit. Until a commit lands, a file's allocated blocks count
// its logical size, after it the bytes the store keeps (fillAttr); a small
// file's commit is a metadata transaction, so stat waits for it and never
// sees its blocks change after close. Larger files' commits encode for a
// while, and stat and listings do not wait for them.
const statWaitMax = 1 << 20

// waitSmallCommit waits for the background commit of ino if its file is
// small (statWaitMax), and reports whether there was one.
func (f *FS) waitSmallCommit(ino chain.Ino) bool {
	of := f.open.get(ino)
	if of == nil {
		return false
	}
	pc := of.smallCommit.Load()
	if pc == nil {
		return false
	}
	<-pc.done
	return true
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
	if w.Size() <= statWaitMax {
		of.smallCommit.Store(pc)
	}
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
		of.smallCommit.CompareAndSwap(pc, nil)
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

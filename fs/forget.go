package fs

import (
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// Freeing content commits synced, and the next namespace change waits for
// that commit: `rm -rf checkpoint-N` forgets a file per unlink, and one
// commit for the burst keeps the unlinks from each waiting for the disk.
// So a forgotten inode waits until no other has come for forgetQuiet, and
// at most forgetMaxDelay, so that a long stream of unlinks still frees
// space as it goes. A quiet gap rather than a fixed window: on a loaded
// machine the unlinks of one rm -rf can span more than any short window.
const (
	forgetQuiet    = 20 * time.Millisecond
	forgetMaxDelay = 500 * time.Millisecond
)

// forgetQueue collects inodes the kernel forgot and frees the orphans among
// them in one transaction. An orphan not yet freed when the daemon dies is
// freed by the next mount (the store's recovery), as before.
type forgetQueue struct {
	// quiet and maxDelay override forgetQuiet and forgetMaxDelay when set
	// (tests).
	quiet, maxDelay time.Duration

	mu          sync.Mutex
	pending     []chain.Ino
	first, last time.Time // when the oldest and the newest pending were queued
	// running counts the batches scheduled or under way; idle is
	// signalled when it falls to zero. (A WaitGroup would race: a batch
	// is scheduled while Drain may wait on a count of zero.)
	running int
	idle    sync.Cond
	// closed: the filesystem shut down (FS.Shutdown), and the store is
	// about to close: nothing more is freed here (the next mount frees
	// the orphans left).
	closed bool
}

func (q *forgetQueue) delays() (quiet, maxDelay time.Duration) {
	quiet, maxDelay = forgetQuiet, forgetMaxDelay
	if q.quiet > 0 {
		quiet = q.quiet
	}
	if q.maxDelay > 0 {
		maxDelay = q.maxDelay
	}
	return quiet, maxDelay
}

func (q *forgetQueue) add(f *FS, ino chain.Ino) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	now := time.Now()
	q.pending = append(q.pending, ino)
	q.last = now
	if len(q.pending) == 1 {
		q.first = now
		q.running++
		quiet, maxDelay := q.delays()
		time.AfterFunc(min(quiet, maxDelay), func() { q.fire(f) })
	}
}

// fire frees the batch once it has been quiet long enough, or has waited
// the longest it may; otherwise it looks again when it would be.
func (q *forgetQueue) fire(f *FS) {
	q.mu.Lock()
	if len(q.pending) > 0 {
		quiet, maxDelay := q.delays()
		now := time.Now()
		wait := quiet - now.Sub(q.last)
		if left := maxDelay - now.Sub(q.first); left < wait {
			wait = left
		}
		if wait > 0 {
			q.mu.Unlock()
			time.AfterFunc(wait, func() { q.fire(f) })
			return
		}
	}
	q.mu.Unlock()
	q.flush(f)
	q.mu.Lock()
	if q.running--; q.running == 0 && q.idle.L != nil {
		q.idle.Broadcast()
	}
	q.mu.Unlock()
}

// flush frees the queued orphans that nothing uses again (a file opened by
// handle since it was forgotten stays).
func (q *forgetQueue) flush(f *FS) {
	q.mu.Lock()
	inos := q.pending
	q.pending = nil
	q.mu.Unlock()
	var free []chain.Ino
	for _, ino := range inos {
		if !f.open.inUse(ino) {
			free = append(free, ino)
		}
	}
	if len(free) == 0 {
		return
	}
	if err := f.names.Forget(free...); err != nil {
		toErrno(err) // logs it; the next mount frees them
	}
}

// wait frees what is queued now and waits for the batches under way.
func (q *forgetQueue) wait(f *FS) {
	q.flush(f)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle.L == nil {
		q.idle.L = &q.mu
	}
	for q.running > 0 {
		q.idle.Wait()
	}
}

// close ends the queue at shutdown: what is queued stays for the next
// mount to free, later forgets are ignored (so no batch finds any), and it
// returns once no batch runs, so none reaches the store after it closes. (go-fuse forgets the
// root when its serve loop ends, which can be after the mount command's
// Drain: that forget once reached a closed database.)
func (q *forgetQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.pending = nil
	if q.idle.L == nil {
		q.idle.L = &q.mu
	}
	for q.running > 0 {
		q.idle.Wait()
	}
}

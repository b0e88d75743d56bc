package fs

import (
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// forgetDelay is how long a forgotten inode waits for others to be freed
// with it. Freeing content commits synced, and the next namespace change
// waits for that commit: `rm -rf checkpoint-N` forgets a file per unlink,
// and one commit for the burst keeps the unlinks from each waiting for the
// disk.
const forgetDelay = 20 * time.Millisecond

// forgetQueue collects inodes the kernel forgot and frees the orphans among
// them in one transaction. An orphan not yet freed when the daemon dies is
// freed by the next mount (the store's recovery), as before.
type forgetQueue struct {
	mu      sync.Mutex
	pending []chain.Ino
	// running counts the batches scheduled or under way; idle is
	// signalled when it falls to zero. (A WaitGroup would race: a batch
	// is scheduled while Drain may wait on a count of zero.)
	running int
	idle    sync.Cond
}

func (q *forgetQueue) add(f *FS, ino chain.Ino) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, ino)
	if len(q.pending) == 1 {
		q.running++
		time.AfterFunc(forgetDelay, func() {
			q.flush(f)
			q.mu.Lock()
			if q.running--; q.running == 0 && q.idle.L != nil {
				q.idle.Broadcast()
			}
			q.mu.Unlock()
		})
	}
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
	if err := f.store.Forget(free...); err != nil {
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

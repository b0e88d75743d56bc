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
	running sync.WaitGroup
}

func (q *forgetQueue) add(f *FS, ino chain.Ino) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, ino)
	if len(q.pending) == 1 {
		q.running.Add(1)
		time.AfterFunc(forgetDelay, func() {
			defer q.running.Done()
			q.flush(f)
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
	q.running.Wait()
}

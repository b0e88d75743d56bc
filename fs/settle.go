package fs

import (
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/fs/save"
)

// Files appended to in quick succession. A log that a training appends a
// line to at every step (open with O_APPEND, write, close: Lightning's
// metrics.csv, a script's log.txt) would otherwise be encoded whole at
// every close, and each open would wait for that commit: the cost of a line
// grew with the file (48 ms for a line appended to a 50 MiB file, against
// 0.02 ms on a plain filesystem). A file opened to append to while its
// previous commit was pending, or within hotWindow of its landing, is hot:
// the release of its last writer lets it settle first. Its staging file
// stays the file's content, closed (a crash keeps it, as any closed save),
// and the commit runs once nobody has written it for settleQuiet, or
// settleMax after its content started. A writer that opens it to append
// meanwhile takes the staging file over, with no copy and no commit: the
// closed save stays its first bytes, which a crash keeps
// (staging.Appending). Whatever observes the committed content (another
// writer, fsync, a truncate, the user.ckptfs.* attributes, fsync of a
// directory, the report, unmount) cuts the wait short: waitCommit wakes it.

const (
	hotWindow   = time.Second
	settleQuiet = time.Second
	settleMax   = 10 * time.Second
)

// recentCommits remembers when the commits of the last moments landed, per
// inode; entries older than hotWindow are pruned as it grows.
type recentCommits struct {
	mu    sync.Mutex
	at    map[chain.Ino]time.Time
	prune int // size at which the next prune runs
}

func (r *recentCommits) landed(ino chain.Ino) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[chain.Ino]time.Time{}
	}
	r.at[ino] = now
	if len(r.at) < max(r.prune, 256) {
		return
	}
	for i, t := range r.at {
		if now.Sub(t) >= hotWindow {
			delete(r.at, i)
		}
	}
	r.prune = 2 * len(r.at) // amortised: a prune per doubling
}

func (r *recentCommits) recent(ino chain.Ino) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[ino]
	return ok && time.Since(t) < hotWindow
}

// noteWriterOpen notes the open of a writer (appending: it only
// appends) in of's save: see save.State.WriterOpened. Call with of.mu
// held, before waitCommit.
func (n *Node) noteWriterOpen(of *openFile, appending bool) {
	of.save.WriterOpened(appending, appending && n.fsys.recent.recent(n.ino))
}

// settleEnd is how a commit's settling ended.
type settleEnd int

const (
	settled   settleEnd = iota // commit it now
	takenOver                  // a writer has the staging file: no commit
	dropped                    // deleted and no longer open: no commit
)

// settle waits until sf, the closed staging file of a hot file committed
// by pc, settles (see above), and reports what then becomes of it.
func (n *Node) settle(of *openFile, pc *save.Commit, sf *stagedFile) settleEnd {
	f := n.fsys
	closed := time.Unix(0, sf.closedAt.Load())
	wait := min(time.Until(closed.Add(settleQuiet)), time.Until(sf.born.Add(settleMax)))
	t := time.NewTimer(wait)
	select {
	case <-t.C:
	case <-pc.Wake():
	}
	t.Stop()
	of.mu.Lock()
	defer of.mu.Unlock()
	if pc.Settled() {
		return takenOver
	}
	if in, err := f.names.Inode(n.ino); err == nil && in.Nlink == 0 && f.open.others(of) == 0 {
		return dropped
	}
	return settled
}

// wakeSettling cuts short the settling of every commit that waits for its
// file to settle (Drain).
func (f *FS) wakeSettling() {
	for _, of := range f.open.snapshot() {
		of.mu.Lock()
		if pc := of.save.Running(); pc != nil {
			pc.WakeUp()
		}
		of.mu.Unlock()
	}
}

package fs

import (
	"errors"
	"os"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// A full host filesystem. The simulated device's image and the staging
// files share the store directory's filesystem, so a commit needs room there
// beside the staging file it reads: a file whose close succeeded can find
// none (other saves filled the disk meanwhile). Its content is then kept,
// as a plain filesystem keeps a file closed before its disk filled: the
// staging file stays, marked closed (the next open of the store ingests it
// if the daemon dies, or adopts it again if there is still no room: the
// store's open does not fail for it), serves the file's reads, and is
// committed once the host has room. A writer that opens the file meanwhile
// takes the staging file over (its release commits it), and fsync tries
// the commit at once, reporting ENOSPC while there is no room. The
// simulated device being full is another matter: the device is the store's
// capacity, and that commit fails as a plain filesystem's write would
// (chain.ErrNoSpace): the file keeps its previous content.
//
// A commit that fails for any other reason (an error of the store, the
// device or the metadata) is treated the same way: a closed file is never
// dropped for a failure the writer could not see. Its staging file stays,
// closed, as the file's content, the failure is reported by the next fsync
// or close of the file and counted in the report (commits_failed,
// saves_retrying), and the commit is tried again after a backoff from one
// second to a minute, or at the store's next open.

// keepStaged reports whether a failed commit keeps its staging file for a
// later try: every failure but the simulated device being full (reported to
// the writer as ENOSPC, as a plain filesystem's write would be), the file's
// deletion, and a staging file that is no longer the file's.
func keepStaged(err error) bool {
	return err != nil && err != errGone && !errors.Is(err, chain.ErrNoSpace) && !errors.Is(err, chain.ErrNotFound)
}

// hostSpacePoll is how often a save waiting for room looks at the host
// filesystem's free space.
const hostSpacePoll = time.Second

// hostFree is the room left on the filesystem of the staging files, in
// bytes, as an unprivileged writer sees it.
func (f *FS) hostFree() (int64, bool) {
	dir, err := f.stagingDir()
	if err != nil {
		return 0, false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir.Path(), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}

// commitLater keeps sf, the staging file of inode ino whose commit failed
// with cause (keepStaged), as the file's content, and commits it once the
// host has room (a full host) or once its backoff has passed (any other
// failure). counted, if not nil, is called once the save counts as kept
// (Drain and the report see it). It ends without committing
// when the commit is no longer its to make: a writer took the file over,
// fsync committed it, the file was deleted and is no longer open, or the
// filesystem shuts down (the staging file then stays closed, for the
// store's next open). It holds of (as a handle) until it ends. Its
// caller put the save in the kept state (save.State.Keep, or Adopt at
// mount), in the same hold of of.mu that ended its commit; commitLater
// ends that state.
func (f *FS) commitLater(ino chain.Ino, of *openFile, sf *stagedFile, cause error, counted func()) {
	waiting := &f.waitingForRoom
	if chain.HostFull(cause) {
		logrus.WithError(cause).Warnf("%s: no room on the host filesystem of the store to commit it: it stays in its staging file, and is committed once there is room", sf.path())
	} else {
		waiting = &f.retrying
		f.commitsFailed.Add(1)
		logrus.WithError(cause).Errorf("commit %s after close failed: it stays in its staging file, and its commit is tried again", sf.path())
	}
	waiting.Add(1)
	defer waiting.Add(-1)
	if counted != nil {
		counted()
	}
	try := roomTry{host: chain.HostFull(cause)}
	try.failed(f)
	tick := time.NewTicker(hostSpacePoll)
	defer tick.Stop()
	for {
		<-tick.C
		// Shutdown waits for a try under way: the store closes after it.
		f.roomMu.RLock()
		select {
		case <-f.quit:
			f.roomMu.RUnlock()
			return
		default:
		}
		of.mu.Lock()
		done, err := f.tryCommitLater(ino, of, sf, &try)
		if done {
			of.save.KeepEnded()
		}
		of.mu.Unlock()
		f.roomMu.RUnlock()
		if !done {
			continue
		}
		if err != nil {
			logrus.WithError(err).Errorf("commit %s after close: its previous content stays", sf.path())
		}
		if f.open.release(ino, of, false, nil) {
			f.forget(ino)
		}
		return
	}
}

// tryCommitLater is one look of commitLater; it reports whether it is
// done, and the error of a commit that failed for good (keepStaged). Call
// with of.mu held.
func (f *FS) tryCommitLater(ino chain.Ino, of *openFile, sf *stagedFile, try *roomTry) (bool, error) {
	if of.stage != sf || of.save.Running() != nil || f.open.writers(of) > 0 {
		return true, nil // a writer took it over: its release commits it
	}
	in, err := f.names.Inode(ino)
	if !of.save.IsChanged() || err == nil && in.Nlink == 0 && f.open.others(of) == 0 {
		// Committed by fsync, or deleted and no longer open.
		of.endStage(f, ino, sf)
		return true, nil
	}
	if sf.State() != staging.Closed { // a truncate changed it
		if err := sf.Mark(staging.Closed); err != nil {
			logrus.WithError(err).Warnf("%s: a crash before its commit loses it", sf.path())
		}
	}
	if size, _, _ := sf.attr(); !try.due(f, size) {
		return false, nil
	}
	f.chargeStagedIfDue(sf) // dirty past the expiry: the host wrote it back
	err = f.commitFileNow(ino, sf.path(), sf, 0)
	if keepStaged(err) {
		if try.host = chain.HostFull(err); !try.host {
			f.commitsFailed.Add(1)
			of.save.Fail(err) // reported by the next fsync or close
			logrus.WithError(err).Errorf("commit %s after close failed again: it stays in its staging file", sf.path())
		}
		try.failed(f)
		return false, nil
	}
	if err == nil {
		sf.committed = true
	}
	of.endStage(f, ino, sf)
	of.save.Retried(err) // committed under its name now; a success mends the failure
	f.markStale(ino)     // the kernel's pages may be another content's
	return true, err
}

// roomTry decides when a kept save is tried again: not sooner than a
// backoff that doubles with each failure, up to a minute, and for a save
// waiting for room, when the host has more room than at the last failed
// try (a delta may need far less than the file), or room for the file
// stored as it is: a failure that room does not explain (a quota, which
// statfs does not show) then costs no write each second.
type roomTry struct {
	host  bool  // the last failure was for room on the host
	free  int64 // the host's room after the last failure
	fails int
	next  time.Time
}

func (r *roomTry) failed(f *FS) {
	r.free, _ = f.hostFree()
	r.next = time.Now().Add(min(hostSpacePoll<<min(r.fails, 6), time.Minute))
	r.fails++
}

func (r *roomTry) due(f *FS, size int64) bool {
	if time.Now().Before(r.next) {
		return false
	}
	if !r.host {
		return true
	}
	free, ok := f.hostFree()
	return ok && (free >= r.free+(1<<20) || free >= size+size/8+(1<<20))
}

// AdoptStaged takes over the staging files of saves that a daemon that
// died left closed and that the store's open could not commit
// (chain.Store.TakeWaitingStaged): each is the content of its file until
// it is committed, as at run time.
func (f *FS) AdoptStaged(entries []chain.KeptStaged) error {
	dir, err := f.stagingDir()
	if err != nil {
		return err
	}
	for _, e := range entries {
		file, err := dir.Reopen(e.Entry)
		if err != nil {
			return err
		}
		ino := chain.Ino(e.Ino)
		sf := &stagedFile{File: file, born: time.Now(), path: func() string {
			p, _ := f.names.PathOf(ino)
			return p
		}}
		f.stagedClosed(sf)
		of := f.open.acquire(ino) // the hold commitLater lets go
		of.mu.Lock()
		of.setStage(sf, f)
		of.save.Adopt() // kept, as a save whose commit failed at run time
		of.mu.Unlock()
		go f.commitLater(ino, of, sf, e.Cause, nil)
	}
	return nil
}

// SavesWaitingForRoom is the number of saves waiting for room on the host.
func (f *FS) SavesWaitingForRoom() int64 { return f.waitingForRoom.Load() }

// SavesRetrying is the number of saves kept in their staging files after
// a commit that failed other than for room, waiting to be tried again.
func (f *FS) SavesRetrying() int64 { return f.retrying.Load() }

// CommitsFailed counts the commits of closed files that failed and were
// kept to be tried again (keepStaged), since the mount.
func (f *FS) CommitsFailed() int64 { return f.commitsFailed.Load() }

// Shutdown ends the filesystem's background work once the server has
// stopped and Drain returned: the staging files kept only as the kernel's
// backing files are deleted, the saves waiting for room on the host
// stay in their staging files, closed, for the store's next open, and
// orphans not freed yet are left for it too.
func (f *FS) Shutdown() {
	f.quitOnce.Do(func() { close(f.quit) })
	f.roomMu.Lock() // no try of commitLater runs past this
	f.roomMu.Unlock()
	f.forgets.close() // nor a batch of forgotten inodes
	f.dropBackings()
	f.stagingOnce.Do(func() {}) // none made from now on
	if f.stagingTemp != "" {
		// No crash recovery reads it (a bare store in a test): nothing in
		// it outlives the filesystem.
		if err := os.RemoveAll(f.stagingTemp); err != nil {
			logrus.WithError(err).Warn("remove the temporary staging directory")
		}
	}
}

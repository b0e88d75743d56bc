package chain

import (
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// pin keeps a version from being freed while an ingest deltas against it:
// its deltas would otherwise point at pages handed to someone else.
func (s *Store) pin(id meta.VersionID) {
	s.pinMu.Lock()
	s.pins[id]++
	s.pinMu.Unlock()
}

// unpin drops a pin; a version whose release waited for it is freed now.
func (s *Store) unpin(id meta.VersionID) {
	s.pinMu.Lock()
	s.pins[id]--
	free := s.pins[id] <= 0 && s.deferred[id]
	if s.pins[id] <= 0 {
		delete(s.pins, id)
		delete(s.deferred, id)
	}
	s.pinMu.Unlock()
	if free {
		// No claim is dropped here: the release that deferred already
		// dropped its own. Free the version if nothing needs it now.
		err := s.update(func(tx *txn) error { return tx.releaseVersion(id, noClaim) })
		if err != nil {
			logrus.WithError(err).Warnf("free version %d after its last pin", id)
		}
	}
}

// pinnedOrDefer reports whether id is pinned, and if so remembers to retry
// freeing it when the pin goes. If not, id is marked as being freed in tx
// until tx commits or rolls back: a reader cannot pin it meanwhile
// (pinForRead), so none starts on pages about to be freed.
func (s *Store) pinnedOrDefer(mtx *meta.Tx, id meta.VersionID) bool {
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	if s.pins[id] > 0 {
		s.deferred[id] = true
		return true
	}
	s.freeing[id] = true
	mtx.OnCommit(func() {
		s.freedSeq.Add(1) // before the mark goes: see pinForRead
		s.pinMu.Lock()
		delete(s.freeing, id)
		s.pinMu.Unlock()
	})
	mtx.OnRollback(func() {
		s.pinMu.Lock()
		delete(s.freeing, id)
		s.pinMu.Unlock()
	})
	return false
}

// pinForRead pins version id for one read, unless it is being freed. It
// returns the count of versions freed so far, read after the pin: a reader
// that checked its version exists at that count knows it still does.
func (s *Store) pinForRead(id meta.VersionID) (freed uint64, ok bool) {
	s.pinMu.Lock()
	s.waitRewrittenLocked(id)
	if s.freeing[id] {
		s.pinMu.Unlock()
		return 0, false
	}
	s.pins[id]++
	s.pinMu.Unlock()
	return s.freedSeq.Load(), true
}

// claim is what a release gives up on a version.
type claim uint8

const (
	liveClaim      claim = iota // the version is no longer a file's content
	dependentClaim              // a version coded against it is gone
	noClaim                     // nothing: only free it if nothing needs it
)

// releaseVersion drops one claim on a version. A version with no liveness,
// no dependents and no pin is freed: its records deleted, its pages trimmed
// and freed, and its own reference released in turn (a dependent claim).
func (tx *txn) releaseVersion(id meta.VersionID, c claim) error {
	for id != 0 {
		v, err := tx.mtx.Version(id)
		if errors.Is(err, meta.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		switch c {
		case liveClaim:
			v.Live = false
		case dependentClaim:
			if v.Dependents > 0 {
				v.Dependents--
			}
		}
		c = dependentClaim
		if v.Live || v.Dependents > 0 || tx.s.pinnedOrDefer(tx.mtx, id) {
			return tx.mtx.PutVersion(v)
		}
		if err := tx.freeVersion(v); err != nil {
			return err
		}
		id = v.Ref
	}
	return nil
}

// freeVersion deletes a version nobody needs.
func (tx *txn) freeVersion(v *meta.Version) error {
	if err := tx.mtx.DeleteVersion(v.ID); err != nil {
		return fmt.Errorf("free version %d: %w", v.ID, err)
	}
	if err := tx.s.data.Free(tx.mtx, v.Pack); err != nil {
		return fmt.Errorf("free version %d: %w", v.ID, err)
	}
	if err := tx.mtx.AddCounter("stored_bytes", -v.PackBytes); err != nil {
		return err
	}
	if f, err := tx.mtx.Family(v.Family); err == nil {
		changed := false
		if f.Last == v.ID {
			f.Last, changed = 0, true
		}
		if f.Baseline == v.ID {
			f.Baseline, changed = 0, true
		}
		if changed {
			if err := tx.mtx.PutFamily(f); err != nil {
				return err
			}
		}
	}
	s, id := tx.s, v.ID
	tx.mtx.OnCommit(func() {
		s.cache.DropVersion(id)
		s.refs.DropVersion(id)
	})
	return nil
}

// dropContent releases what a deleted inode held: its content, its shadow
// pages and the space fallocate reserved for it (the namespace's Drop
// hook).
func (tx *txn) dropContent(n *meta.Inode) error {
	// What it frees is handed out again only after a synced commit
	// (meta.Tx.OnDurable): commit now, so that df and the next save see
	// the space at once.
	tx.mtx.RequireSync()
	if err := tx.shadowRelease(n.Ino); err != nil {
		return err
	}
	s, ino := tx.s, n.Ino
	tx.mtx.OnCommit(func() { s.dropReserved(ino) })
	return tx.releaseVersion(n.Version, liveClaim)
}

// markRewriting marks ids as being swapped by mtx, unless one is pinned
// (errBusy): until mtx ends, reads wait to pin them (pinForRead), so none
// starts on records or pages the transaction replaces. An ingest pins its
// reference outside any transaction (ViewBetweenUpdates), so one that
// chose a version before mtx holds a pin, and one after sees mtx's result.
func (s *Store) markRewriting(mtx *meta.Tx, ids []meta.VersionID) error {
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	for _, id := range ids {
		if s.pins[id] > 0 {
			return fmt.Errorf("version %d is being read or coded against: %w", id, errBusy)
		}
	}
	for _, id := range ids {
		s.rewriting[id] = true
	}
	clear := func() {
		s.pinMu.Lock()
		for _, id := range ids {
			delete(s.rewriting, id)
		}
		s.rewritten.Broadcast()
		s.pinMu.Unlock()
	}
	mtx.OnCommit(clear)
	mtx.OnRollback(clear)
	return nil
}

// waitRewrittenLocked waits, with pinMu held, until no transaction is
// swapping id's coding (markRewriting): one ends in milliseconds.
func (s *Store) waitRewrittenLocked(id meta.VersionID) {
	for s.rewriting[id] {
		s.rewritten.Wait()
	}
}

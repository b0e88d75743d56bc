package save

import (
	"errors"
	"testing"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func wantPhase(t *testing.T, s *State, want Phase) {
	t.Helper()
	if got := s.Phase(); got != want {
		t.Fatalf("phase %v, want %v", got, want)
	}
}

func TestWritesChangeTheSave(t *testing.T) {
	var s State
	wantPhase(t, &s, Clean)
	s.Staged(false) // a writer opened: the staging file holds the committed content
	wantPhase(t, &s, Clean)
	s.Change()
	if !s.IsChanged() {
		t.Fatal("a write left the save unchanged")
	}
	wantPhase(t, &s, Changed)
	s.Ended()
	wantPhase(t, &s, Clean)

	s.Staged(true) // O_TRUNC
	wantPhase(t, &s, Changed)
	s.Unchanged() // a new empty file: what the inode holds already
	wantPhase(t, &s, Clean)

	s.Change()
	s.Unchanged() // close reported the refusal: the previous content stays
	wantPhase(t, &s, Clean)
}

func TestCommittedNow(t *testing.T) {
	var s State
	s.Change()
	s.CommittedNow(false) // fsync committed it all
	wantPhase(t, &s, Clean)
	s.Change()
	s.CommittedNow(true) // a passthrough writer may write on unseen
	wantPhase(t, &s, Changed)
}

func TestQueueReleaseLand(t *testing.T) {
	var s State
	s.Change()
	tk := &Ticket{N: 7}
	s.Queue(tk)
	wantPhase(t, &s, Queued)
	if s.QueuedTicket() != tk {
		t.Fatal("queued ticket lost")
	}
	got, hot := s.Release()
	if got != tk || hot {
		t.Fatalf("Release = %v, %v; want the ticket, not hot", got, hot)
	}
	if s.QueuedTicket() != nil {
		t.Fatal("Release left the ticket queued")
	}
	c := s.Begin(false)
	wantPhase(t, &s, Committing)
	if s.Running() != c || closed(c.Done()) {
		t.Fatal("the running commit is not c, or is done already")
	}
	if s.Land(c, nil) {
		t.Fatal("Land reports a rename that did not happen")
	}
	if !closed(c.Done()) || s.Running() != nil {
		t.Fatal("Land left the commit running")
	}
	if err := s.TakeFailure(); err != nil {
		t.Fatalf("a commit that landed left failure %v", err)
	}
}

func TestLandFailureIsReportedOnce(t *testing.T) {
	var s State
	c := s.Begin(false)
	boom := errors.New("boom")
	s.Land(c, boom)
	if err := s.TakeFailure(); err != boom {
		t.Fatalf("TakeFailure = %v, want %v", err, boom)
	}
	if err := s.TakeFailure(); err != nil {
		t.Fatalf("failure reported twice: %v", err)
	}
}

func TestRenameWhileCommitting(t *testing.T) {
	var s State
	if s.Rename() {
		t.Fatal("Rename reports a commit where none runs")
	}
	c := s.Begin(false)
	if !s.Rename() {
		t.Fatal("Rename does not see the running commit")
	}
	if !s.Land(c, nil) {
		t.Fatal("Land lost the rename")
	}
	c = s.Begin(false)
	if s.Land(c, nil) {
		t.Fatal("the rename was reported twice")
	}
}

func TestAppendingWriterMakesFileHot(t *testing.T) {
	var s State
	s.WriterOpened(true, false)
	if _, hot := s.Release(); hot {
		t.Fatal("an append to a file at rest made it hot")
	}
	s.WriterOpened(false, true)
	if _, hot := s.Release(); hot {
		t.Fatal("a writer that does not append made the file hot")
	}
	s.WriterOpened(true, true) // its last commit just landed
	if _, hot := s.Release(); !hot {
		t.Fatal("an append after a commit landed a moment ago left the file cold")
	}
	c := s.Begin(false)
	s.WriterOpened(true, false) // while a commit runs
	if _, hot := s.Release(); !hot {
		t.Fatal("an append while a commit runs left the file cold")
	}
	s.Land(c, nil)
}

func TestSettlingWakesAndIsTakenOver(t *testing.T) {
	var s State
	c := s.Begin(true)
	wantPhase(t, &s, Settling)
	if closed(c.Wake()) {
		t.Fatal("woken before anyone woke it")
	}
	c.WakeUp()
	c.WakeUp() // twice is fine
	if !closed(c.Wake()) {
		t.Fatal("WakeUp did not wake it")
	}
	if c.Settled() {
		t.Fatal("a commit woken by a reader reports a takeover")
	}
	wantPhase(t, &s, Committing)
	s.Land(c, nil)

	c = s.Begin(true)
	s.WriterOpened(true, false) // an appender takes the staging file over
	if !closed(c.Wake()) || !c.Settled() {
		t.Fatal("an appending writer did not take the settling commit over")
	}
	s.Skip(c, nil)
	if !closed(c.Done()) || s.Running() != nil || s.TakeFailure() != nil {
		t.Fatal("Skip left the commit running, or a failure")
	}
	if _, hot := s.Release(); !hot {
		t.Fatal("the appender's save is not hot")
	}

	c = s.Begin(false)
	c.WakeUp() // not settling: nothing to wake
	if c.Wake() != nil {
		t.Fatal("a commit that does not settle has a wake channel")
	}
	s.Land(c, nil)
}

func TestSkipWithFailure(t *testing.T) {
	var s State
	c := s.Begin(true)
	c.Settled()
	boom := errors.New("could not queue")
	s.Skip(c, boom)
	if err := s.TakeFailure(); err != boom {
		t.Fatalf("TakeFailure = %v, want %v", err, boom)
	}
}

func TestKeepAndRetry(t *testing.T) {
	var s State
	s.Change()
	c := s.Begin(false)
	s.Keep(c, nil) // the host is full: waiting, nothing to report
	wantPhase(t, &s, Kept)
	if !closed(c.Done()) || !s.IsKept() {
		t.Fatal("Keep did not end the commit and keep the save")
	}
	if s.TakeFailure() != nil {
		t.Fatal("a save waiting for room reports a failure")
	}
	if s.WaitsForRelease(true) {
		t.Fatal("a kept save waits for a release")
	}
	boom := errors.New("device error")
	s.Fail(boom)   // a later try failed
	s.Retried(nil) // the next committed: the failure is mended
	s.Ended()
	s.KeepEnded()
	wantPhase(t, &s, Clean)
	if s.TakeFailure() != nil {
		t.Fatal("a committed retry left its failure to report")
	}

	c = s.Begin(false)
	s.Keep(c, boom)
	if s.TakeFailure() != boom {
		t.Fatal("a kept save's failure is not reported")
	}
	s.Rename() // no commit runs: nothing to move
	s.Retried(boom)
	s.KeepEnded()
	if s.IsKept() {
		t.Fatal("KeepEnded left the save kept")
	}
}

func TestAdoptIsKept(t *testing.T) {
	var s State
	s.Adopt()
	wantPhase(t, &s, Kept)
	if !s.IsChanged() {
		t.Fatal("an adopted save is not a change to commit")
	}
	s.Retried(nil)
	s.Ended()
	s.KeepEnded()
	wantPhase(t, &s, Clean)
}

func TestClosedWritersWaitForRelease(t *testing.T) {
	var s State
	if s.WaitsForRelease(false) {
		t.Fatal("a save with no closed writer waits for a release")
	}
	if !s.WaitsForRelease(true) {
		t.Fatal("a save marked closed does not wait for its release")
	}
	s.WriterClosed()
	if s.ClosedWriters() != 1 || !s.WaitsForRelease(false) {
		t.Fatal("a closed writer is not waited for")
	}
	c := s.Begin(false)
	if s.WaitsForRelease(true) {
		t.Fatal("a save whose commit runs waits for a release")
	}
	s.Land(c, nil)
	s.WriterReleased()
	if s.ClosedWriters() != 0 || s.WaitsForRelease(false) {
		t.Fatal("WriterReleased did not uncount the writer")
	}
}

func TestPhaseNames(t *testing.T) {
	for p := Clean; p <= Kept; p++ {
		if p.String() == "unknown" {
			t.Fatalf("phase %d has no name", p)
		}
	}
}

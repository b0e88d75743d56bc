package chain

import (
	"bytes"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// TestReferenceWaitsForRunningCommit: a save that chooses its reference
// while its family's previous save is still committing (a staged save,
// committed in the background after its close) waits for that commit and
// is coded against it; it found no reference and stored a baseline.
func TestReferenceWaitsForRunningCommit(t *testing.T) {
	for _, tc := range []struct {
		names  [2]string
		reason string
	}{
		{[2]string{"ckpt-0.safetensors", "ckpt-1.safetensors"}, meta.RefFamily},
		// torch.save of the same state to ckpt_N.pt, then to last.pt.
		{[2]string{"ckpt-0.safetensors", "last.safetensors"}, meta.RefLayout},
	} {
		t.Run(tc.reason, func(t *testing.T) { referenceWaits(t, tc.names, tc.reason) })
	}
}

func referenceWaits(t *testing.T, names [2]string, reason string) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	series := modelSeries(7, []string{"w", "m"}, 200_000, 2)
	inos := [2]Ino{createFile(t, s, names[0]), createFile(t, s, names[1])}
	first, err := s.BeginCommitFile(inos[0], names[0])
	if err != nil {
		t.Fatal(err)
	}
	staged := stagedFile(t, int64(len(series[0])), map[int64][]byte{0: series[0]})
	first.w.mu.Lock() // the first commit runs and cannot land yet
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Run(staged, names[0], 1) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.committing.mu.Lock()
		e := s.committing.running[first.w]
		running := e != nil && e.family == policy.FamilyOf(names[0])
		s.committing.mu.Unlock()
		if running {
			break
		}
		if time.Now().After(deadline) {
			first.w.mu.Unlock()
			t.Fatal("the first commit never started")
		}
	}
	second, err := s.NewWriter(inos[1], pathIs(names[1]))
	if err != nil {
		first.w.mu.Unlock()
		t.Fatal(err)
	}
	secondWritten := make(chan error, 1)
	go func() {
		for off := 0; off < len(series[1]); off += 1 << 20 {
			if _, err := second.WriteAt(series[1][off:min(len(series[1]), off+1<<20)], int64(off), 1); err != nil {
				secondWritten <- err
				return
			}
		}
		secondWritten <- nil
	}()
	select {
	case err := <-secondWritten:
		first.w.mu.Unlock()
		<-firstDone // before the store closes
		t.Fatalf("the second save chose its reference while the first was committing (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	first.w.mu.Unlock()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondWritten; err != nil {
		t.Fatal(err)
	}
	if err := second.Commit(); err != nil {
		t.Fatal(err)
	}
	one, two := info(t, s, inos[0]), info(t, s, inos[1])
	if two.Reference != one.Version || two.RefReason != reason {
		t.Errorf("second save: reference %d (%s), want the first save %d (%s)", two.Reference, two.RefReason, one.Version, reason)
	}
	for i, data := range series {
		if got := readIno(t, s, inos[i]); !bytes.Equal(got, data) {
			t.Errorf("save %d reads back different bytes", i)
		}
	}
}

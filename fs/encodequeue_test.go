package fs

import (
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// TestEncodeQueueOrder: commits run in the order of their closes, however
// their releases come, at most maxEncoding at once; a ticket whose release
// has not come releaseWait after its close stops holding the others back.
func TestEncodeQueueOrder(t *testing.T) {
	var q encodeQueue
	begin := func() uint64 {
		bc, err := q.begin(func() (*chain.FileCommit, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		return bc.N
	}
	admitted := make(chan uint64, 16)
	admit := func(tk uint64) { go func() { q.admit(tk); admitted <- tk }() }
	expect := func(want ...uint64) {
		t.Helper()
		for _, w := range want {
			select {
			case got := <-admitted:
				if got != w {
					t.Fatalf("admitted %d, want %d", got, w)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ticket %d was never admitted", w)
			}
		}
		select {
		case got := <-admitted:
			t.Fatalf("ticket %d admitted out of turn", got)
		case <-time.After(50 * time.Millisecond):
		}
	}
	a, b, c, d := begin(), begin(), begin(), begin()
	admit(d) // released first, closed last: waits for the others
	admit(c)
	expect()
	admit(a)
	expect(a) // c and d wait for b, closed before them and not yet released
	admit(b)
	expect(b) // two run: c, d wait for a slot
	q.leave()
	expect(c)
	q.leave()
	expect(d)
	q.leave()
	q.leave()

	// A ticket never released (a mapping holds its file) holds the later
	// ones back for releaseWait only.
	held, next := begin(), begin()
	_ = held
	start := time.Now()
	admit(next)
	select {
	case <-admitted:
		if since := time.Since(start); since < releaseWait/2 {
			t.Fatalf("admitted after %v, before the held ticket went stale", since)
		}
	case <-time.After(releaseWait + 5*time.Second):
		t.Fatal("a stale unreleased ticket held the next one back for good")
	}
}

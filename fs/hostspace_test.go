package fs

import (
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/staging"
)

// A save waiting for room is tried again once the host has room, never
// sooner than its backoff, which doubles with each failure up to a minute:
// a failure that free space does not explain (a quota) writes no file each
// second.
func TestRoomTryBackoff(t *testing.T) {
	dir, err := staging.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &FS{Staging: dir}
	r := roomTry{host: true}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		before := time.Now()
		r.failed(f)
		if got := r.next.Sub(before); got < w*time.Second || got > w*time.Second+time.Second {
			t.Errorf("after failure %d: next try in %v, want %v", i+1, got, w*time.Second)
		}
	}
	if r.due(f, 0) {
		t.Error("due before its backoff ended")
	}
	r.next = time.Now().Add(-time.Millisecond)
	if !r.due(f, 0) {
		t.Error("a file that fits the host's room, backoff over: not due")
	}
	if r.due(f, 1<<62) {
		t.Error("due with no more room than at the failure, and not room for the file")
	}
	// A save kept after another failure is due once its backoff ends.
	if r.host = false; !r.due(f, 1<<62) {
		t.Error("a save kept after a failure other than room: not due when its backoff ended")
	}
}

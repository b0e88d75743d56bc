package fs

import (
	"math/rand"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
)

// stallingLookup is a namespace whose Lookup of one name, armed, returns
// the inode as it read it only after the commit in flight has landed: the
// lookup of a file whose save is committing, slowed down.
type stallingLookup struct {
	Namespace
	name    string
	size    int64 // the save's size: the commit has landed once the inode has it
	armed   atomic.Bool
	stalled atomic.Int32 // lookups that read the inode before the commit landed
}

func (s *stallingLookup) Lookup(parent chain.Ino, name string) (*chain.Inode, error) {
	in, err := s.Namespace.Lookup(parent, name)
	if err != nil || name != s.name || !s.armed.Load() || in.Size == s.size {
		return in, err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cur, err := s.Namespace.Inode(in.Ino); err == nil && cur.Size == s.size {
			// The commit recorded the inode; give it the moment it
			// takes to let go of the staging file.
			time.Sleep(50 * time.Millisecond)
			s.stalled.Add(1)
			break
		}
	}
	return in, err
}

// TestLookupDuringCommit looks a file up while the commit of its save is in
// flight, the lookup slowed so that the commit lands between its read of
// the inode and its reply: stat must show the save's size, not the one
// before it (found by make stress: stat of a file just saved showed the
// size of the save before; a read in that second would have stopped there).
func TestLookupDuringCommit(t *testing.T) {
	wrap := &stallingLookup{name: "f"}
	m := newTestMountWrapped(t, nil, true, func(ns Namespace) Namespace { wrap.Namespace = ns; return wrap })
	defer m.stop()
	rng := rand.New(rand.NewSource(1))
	old := make([]byte, 1<<20)
	rng.Read(old)
	if err := os.WriteFile(m.path("f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	for try := 0; try < 5 && wrap.stalled.Load() == 0; try++ {
		save := make([]byte, 8<<20+try)
		rng.Read(save)
		wrap.size = int64(len(save))
		wrap.armed.Store(true)
		if err := os.WriteFile(m.path("f"), save, 0o644); err != nil {
			t.Fatal(err)
		}
		// Forget the name, so that the next stat looks it up.
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			requireDeps(t, "writing /proc/sys/vm/drop_caches", err)
		}
		st, err := os.Lstat(m.path("f"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != int64(len(save)) {
			t.Fatalf("try %d: stat after the save shows %d bytes, the save wrote %d (%d lookups stalled)", try, st.Size(), len(save), wrap.stalled.Load())
		}
		wrap.armed.Store(false)
		m.fsys.Drain()
	}
	if wrap.stalled.Load() == 0 {
		t.Fatal("no lookup read the inode before its commit landed: the test tested nothing")
	}
}

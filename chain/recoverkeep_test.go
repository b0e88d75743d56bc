package chain

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// commitFailingBackend fails its commits while fail is set, with an error that
// is neither a full device nor a full host.
type commitFailingBackend struct {
	storage.Backend
	fail atomic.Bool
}

func (b *commitFailingBackend) Commit(tx *meta.Tx, loc storage.Location) error {
	if b.fail.Load() {
		return errors.New("test: injected commit failure")
	}
	return b.Backend.Commit(tx, loc)
}

// TestRecoverStagedKeepsFailedSave: a save a killed daemon left closed
// whose commit fails at the next open is kept, with its cause, for the
// filesystem to adopt and retry; the open does not fail for it (it did,
// and the mount with it), and the staging file stays.
func TestRecoverStagedKeepsFailedSave(t *testing.T) {
	db, err := meta.Open(filepath.Join(t.TempDir(), MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	backend := &commitFailingBackend{Backend: memstore.New(4096, 1<<12)}
	s, err := NewStore(db, backend, nil, Options{Policy: policy.Default(), CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := s.Names().Create(meta.RootIno, "f", NewNode{Mode: syscall.S_IFREG | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := staging.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := dir.Create(uint64(n.Ino))
	if err != nil {
		t.Fatal(err)
	}
	save := bytes.Repeat([]byte("closed save "), 10000)
	if _, err := f.WriteAt(save, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Mark(staging.Closed); err != nil {
		t.Fatal(err)
	}
	f.Close()

	backend.fail.Store(true)
	ingested, err := s.RecoverStaged(dir)
	if err != nil || ingested != 0 {
		t.Fatalf("RecoverStaged = %d, %v; want 0 ingested and no error", ingested, err)
	}
	kept := s.TakeWaitingStaged()
	if len(kept) != 1 || kept[0].Ino != uint64(n.Ino) || kept[0].Cause == nil {
		t.Fatalf("kept %+v, want the save with its cause", kept)
	}
	if got, err := os.ReadFile(kept[0].Path); err != nil || !bytes.Equal(got, save) {
		t.Fatalf("the kept staging file: %v (%d bytes, want %d)", err, len(got), len(save))
	}
	// The next open ingests it.
	backend.fail.Store(false)
	if ingested, err := s.RecoverStaged(dir); err != nil || ingested != 1 {
		t.Fatalf("RecoverStaged after the failure = %d, %v; want 1", ingested, err)
	}
	if got := readFile(t, s, "f"); !bytes.Equal(got, save) {
		t.Fatal("the recovered save reads back wrong")
	}
}

package chain

import (
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// saveFile is writeFile for goroutines: it returns the error.
func saveFile(s *Store, name string, data []byte) error {
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		if n, err = s.Names().Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644}); err != nil {
			return err
		}
	}
	w, err := s.NewWriter(n.Ino, pathIs(name))
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(data, 0, 1); err != nil {
		return err
	}
	return w.Commit()
}

// TestReferenceFreedWhileChosen: a save chooses the family's last version
// as its reference while that version's last name is being removed. The
// removal must either happen first (the save then takes another reference
// or none) or see the save's pin and keep the version: never free it under
// the save, whose commit then failed with "reference vanished while pinned"
// (found by the full TestRandomOps as EIO on close).
func TestReferenceFreedWhileChosen(t *testing.T) {
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100})
	defer ds.Close()
	s := ds.Store
	series := ckpttest.TrainingSeries(7, 2048, 2)
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for i := range rounds {
		if err := saveFile(s, "ckpt-1.npy", ckpttest.NpyFile(series[0])); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var saveErr, unlinkErr error
		wg.Add(2)
		go func() { defer wg.Done(); saveErr = saveFile(s, "ckpt-2.npy", ckpttest.NpyFile(series[1])) }()
		go func() { defer wg.Done(); unlinkErr = s.Names().Unlink(meta.RootIno, "ckpt-1.npy", nil) }()
		wg.Wait()
		if saveErr != nil || unlinkErr != nil {
			t.Fatalf("round %d: save: %v, unlink: %v", i, saveErr, unlinkErr)
		}
		if got := readFile(t, s, "ckpt-2.npy"); string(got) != string(ckpttest.NpyFile(series[1])) {
			t.Fatalf("round %d: ckpt-2.npy reads back different", i)
		}
		if err := s.Names().Unlink(meta.RootIno, "ckpt-2.npy", nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := mustCheck(t, s, true); len(r.Problems) > 0 {
		t.Fatal(fmt.Sprint(r.Problems))
	}
}

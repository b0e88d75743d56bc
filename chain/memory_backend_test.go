package chain

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// TestStoreOnMemoryBackend runs the store on the in-memory backend, with no
// wear accounts: the seam is all it needs. A series is saved as deltas,
// read back, deleted; fsck finds nothing and every block comes back.
func TestStoreOnMemoryBackend(t *testing.T) {
	db, err := meta.Open(filepath.Join(t.TempDir(), MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mem := memstore.New(4096, 1<<14)
	s, err := NewStore(db, mem, nil, Options{Policy: policy.Default(), CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, before := mem.Space()
	series := ckpttest.TrainingSeries(7, 300_000, 4)
	for i, w := range series {
		writeFile(t, s, fmt.Sprintf("ckpt-%d.npy", i), ckpttest.NpyFile(w), 1<<16)
	}
	s.DropCaches()
	for i, w := range series {
		name := fmt.Sprintf("ckpt-%d.npy", i)
		if got := readFile(t, s, name); !bytes.Equal(got, ckpttest.NpyFile(w)) {
			t.Fatalf("%s read back differs", name)
		}
		n, err := s.Names().Lookup(RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(n.Ino)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && info.Reference == 0 {
			t.Errorf("%s is a baseline: the store did not delta through the memory backend", name)
		}
	}
	mustCheck(t, s, true)
	for i := range series {
		if err := s.Names().Unlink(RootIno, fmt.Sprintf("ckpt-%d.npy", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, s, false)
	if _, after := mem.Space(); after != before {
		t.Fatalf("after deleting everything %d blocks free, want %d", after, before)
	}
}

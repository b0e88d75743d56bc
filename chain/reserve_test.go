package chain

import (
	"errors"
	"math/rand"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// TestReserveSpace: space fallocate reserves for a file (ReserveSpace) is
// counted as used by Statfs, refused beyond the free space, kept from the
// writes of other files, used by the file's own commit, and given back when
// that commit ends or the file is deleted.
func TestReserveSpace(t *testing.T) {
	db, err := meta.Open(filepath.Join(t.TempDir(), MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const bs = 4096
	s, err := NewStore(db, memstore.New(bs, 4096), nil, Options{Policy: policy.Default(), CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewSource(1))
	create := func(name string) Ino {
		n, err := s.Names().Create(RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		return n.Ino
	}
	// write writes n random bytes to ino and commits them.
	write := func(ino Ino, name string, n int) error {
		w, err := s.NewWriter(ino, pathIs(name))
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < n; off += 1 << 20 {
			if _, err := w.WriteAt(randomBytes(rng, min(1<<20, n-off)), int64(off), 1); err != nil {
				w.Abort()
				return err
			}
		}
		return w.Commit()
	}
	free0 := s.Statfs().FreePages

	a := create("a.bin")
	if err := s.ReserveSpace(a, (free0+1)*bs); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("reserving more than is free: %v, want ErrNoSpace", err)
	}
	if got := s.Statfs().FreePages; got != free0 || s.ReservedSpace(a) != 0 {
		t.Fatalf("a refused reservation holds %d bytes, free %d of %d", s.ReservedSpace(a), got, free0)
	}
	const held = 8 << 20
	if err := s.ReserveSpace(a, held-100); err != nil { // rounded up to whole blocks
		t.Fatal(err)
	}
	if got := s.ReservedSpace(a); got != held {
		t.Fatalf("reserved %d bytes, want %d", got, held)
	}
	if got := s.Statfs().FreePages; got != free0-held/bs {
		t.Fatalf("Statfs: %d blocks free after reserving %d of %d", got, held/bs, free0)
	}

	// Other files cannot take it.
	if err := write(create("b.bin"), "b.bin", int(free0*bs-held+(1<<20))); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("writing into the reserved space: %v, want ErrNoSpace", err)
	}
	// A writer claims room for the bytes it has not yet written to the
	// backend (unflushedBound), whether or not it gets to them.
	if err := write(create("c.bin"), "c.bin", int(free0*bs-held-s.unflushedBound())); err != nil {
		t.Fatalf("writing beside the reserved space: %v", err)
	}
	// The file itself can: its commit draws on it, and ends it.
	if err := write(a, "a.bin", held); err != nil {
		t.Fatalf("writing the file that reserved the space: %v", err)
	}
	_, free := s.data.Space()
	if s.ReservedSpace(a) != 0 || s.Statfs().FreePages != free {
		t.Errorf("after the commit %d bytes stay reserved; Statfs %d blocks free, the backend %d",
			s.ReservedSpace(a), s.Statfs().FreePages, free)
	}
	if s.resv.blocks != 0 || s.resv.filesSum != 0 {
		t.Errorf("after the commits %d blocks stay held (%d by files)", s.resv.blocks, s.resv.filesSum)
	}

	// A deleted file gives its reservation back.
	d := create("d.bin")
	if err := s.ReserveSpace(d, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.Names().Unlink(RootIno, "d.bin", nil); err != nil {
		t.Fatal(err)
	}
	if s.ReservedSpace(d) != 0 || s.Statfs().FreePages != free || s.resv.blocks != 0 {
		t.Errorf("a deleted file holds %d bytes; Statfs %d blocks free of %d", s.ReservedSpace(d), s.Statfs().FreePages, free)
	}
	// UnreserveSpace gives back at most what is held.
	if err := s.ReserveSpace(a, 3*bs); err != nil {
		t.Fatal(err)
	}
	s.UnreserveSpace(a, bs+1)
	if got := s.ReservedSpace(a); got != bs {
		t.Errorf("after giving back 2 of 3 blocks, %d bytes held", got)
	}
	s.UnreserveSpace(a, 10*bs)
	if s.ReservedSpace(a) != 0 || s.resv.blocks != 0 {
		t.Errorf("after giving back more than held: %d bytes held, %d blocks", s.ReservedSpace(a), s.resv.blocks)
	}
}

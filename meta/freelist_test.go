package meta

import (
	"math/rand"
	"testing"
)

// TestFreeListMergesInBatches frees many scattered extents in one
// transaction, over a free list long enough to span many database pages
// (one-page holes everywhere, as a fragmented device has), and checks that
// the persisted list stays merged: two touching free extents kept apart
// made the allocator's memory, which merges them, hand out a run the
// database then refused to commit ("not inside free extent"), and every
// later commit of those pages failed.
func TestFreeListMergesInBatches(t *testing.T) {
	db, _ := openTest(t)
	const total = 200_000
	a, err := NewAllocator(db, DeviceSpace, 0, total)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	var used [][]Extent
	// Fragment: reserve everything in small pieces, then free every other.
	for a.FreePages() > 0 {
		r, err := a.Reserve(min(a.FreePages(), int64(1+rng.Intn(8))))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *Tx) error { return a.Commit(tx, r) }); err != nil {
			t.Fatal(err)
		}
		used = append(used, r)
	}
	for round := 0; len(used) > 0; round++ {
		rng.Shuffle(len(used), func(i, j int) { used[i], used[j] = used[j], used[i] })
		batch := min(len(used), 1+rng.Intn(3000))
		err := db.Update(func(tx *Tx) error {
			for _, r := range used[:batch] {
				if err := a.Free(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		used = used[batch:]
		checkFreeListMerged(t, db, DeviceSpace, round)
		// Take some back in large runs, as a save of a big file does.
		if r, err := a.Reserve(int64(1 + rng.Intn(500))); round < 100 && err == nil {
			if err := db.Update(func(tx *Tx) error { return a.Commit(tx, r) }); err != nil {
				t.Fatalf("round %d: commit of a reserved run: %v", round, err)
			}
			used = append(used, r)
		} else if err == nil {
			a.Unreserve(r)
		}
	}
	if free := a.FreePages(); free != total {
		t.Fatalf("%d pages free at the end, want %d", free, total)
	}
}

func checkFreeListMerged(t *testing.T, db *DB, space Space, round int) {
	t.Helper()
	_ = db.View(func(tx *Tx) error {
		exts, err := tx.FreeExtents(space)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(exts); i++ {
			if exts[i-1].End() >= exts[i].Start {
				t.Fatalf("round %d: free extents %v and %v touch or overlap", round, exts[i-1], exts[i])
			}
		}
		return nil
	})
}

// TestChunksAfterDeletesInTransaction: the chunk holding an offset is found
// in a transaction that deleted another version's chunks, whole leaves of
// them, between it and the next key. Views read the open transaction of
// logged updates, which frees versions in; reads of a file's last chunk
// then failed with "no chunk covers offset" (fsstress, fstests
// generic/013).
func TestChunksAfterDeletesInTransaction(t *testing.T) {
	db, _ := openTest(t)
	const chunks = 3000
	err := db.Update(func(tx *Tx) error {
		for id := VersionID(1); id <= 3; id++ {
			for i := int64(0); i < chunks; i++ {
				if err := tx.PutChunk(id, &Chunk{Offset: i * 100, Length: 100, EncLen: 1}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		if err := tx.DeleteVersion(2); err != nil {
			return err
		}
		for _, from := range []int64{chunks*100 - 1, chunks*100 - 50, (chunks - 1) * 100} {
			got, err := tx.Chunks(nil, 1, from, 4)
			if err != nil {
				return err
			}
			if len(got) != 1 || got[0].Offset != (chunks-1)*100 {
				t.Errorf("Chunks(version 1, from %d) = %+v, want its last chunk", from, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

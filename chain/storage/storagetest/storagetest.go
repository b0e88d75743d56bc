// Package storagetest holds the tests every storage backend must pass:
// what package storage promises, checked through the interface alone.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// Open makes a fresh backend of at least 64 and at most 4096 blocks, whose
// allocation state (if it keeps any) lives in db.
type Open func(t *testing.T, db *meta.DB) storage.Backend

// Run checks the backend that open makes.
func Run(t *testing.T, open Open) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *meta.DB, storage.Backend)
	}{
		{"ReadBack", readBack},
		{"WholeBlocksOnly", wholeBlocksOnly},
		{"ReleaseGivesBack", releaseGivesBack},
		{"CommitFollowsTransaction", commitFollowsTransaction},
		{"FreeFollowsTransaction", freeFollowsTransaction},
		{"NoSpace", noSpace},
		{"ShortLocation", shortLocation},
		{"CheckFindsLeakAndOverlap", checkFindsLeakAndOverlap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := meta.Open(filepath.Join(t.TempDir(), "meta.db"), meta.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			tc.fn(t, db, open(t, db))
		})
	}
}

func randomBlocks(b storage.Backend, n int, seed int64) []byte {
	data := make([]byte, n*b.BlockSize())
	rand.New(rand.NewSource(seed)).Read(data)
	return data
}

func free(b storage.Backend) int64 {
	_, f := b.Space()
	return f
}

func commit(t *testing.T, db *meta.DB, b storage.Backend, loc storage.Location) {
	t.Helper()
	if err := db.Update(func(tx *meta.Tx) error { return b.Commit(tx, loc) }); err != nil {
		t.Fatal(err)
	}
}

// readBack: every range of what was written reads back, across writes.
func readBack(t *testing.T, db *meta.DB, b storage.Backend) {
	bs := b.BlockSize()
	var all []byte
	var loc storage.Location
	for i, n := range []int{1, 3, 7} {
		data := randomBlocks(b, n, int64(i))
		l, err := b.Write(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := storage.Blocks(l); got != int64(n) {
			t.Fatalf("write of %d blocks returned a location of %d", n, got)
		}
		loc = meta.AppendExtents(loc, l)
		all = append(all, data...)
	}
	commit(t, db, b, loc)
	rng := rand.New(rand.NewSource(9))
	for range 200 {
		off := rng.Intn(len(all))
		n := rng.Intn(min(len(all)-off, 3*bs)) + 1
		p := make([]byte, n)
		if err := b.ReadAt(loc, p, int64(off)); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		if !bytes.Equal(p, all[off:off+n]) {
			t.Fatalf("ReadAt(%d, %d) differs from what was written", off, n)
		}
	}
}

func wholeBlocksOnly(t *testing.T, _ *meta.DB, b storage.Backend) {
	if _, err := b.Write(make([]byte, b.BlockSize()+1)); err == nil {
		t.Fatal("a write of a block and a byte was accepted")
	}
}

func releaseGivesBack(t *testing.T, _ *meta.DB, b storage.Backend) {
	before := free(b)
	loc, err := b.Write(randomBlocks(b, 5, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := free(b); got != before-5 {
		t.Fatalf("after writing 5 blocks %d free, want %d", got, before-5)
	}
	b.Release(loc)
	if got := free(b); got != before {
		t.Fatalf("after release %d free, want %d", got, before)
	}
}

// commitFollowsTransaction: a commit in a transaction that fails leaves the
// space reserved, not the store's, so it can still be released.
func commitFollowsTransaction(t *testing.T, db *meta.DB, b storage.Backend) {
	before := free(b)
	loc, err := b.Write(randomBlocks(b, 4, 2))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = db.Update(func(tx *meta.Tx) error {
		if err := b.Commit(tx, loc); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v", err)
	}
	b.Release(loc)
	if got := free(b); got != before {
		t.Fatalf("released after a failed commit: %d free, want %d", got, before)
	}
	var problems []string
	if err := db.View(func(tx *meta.Tx) error {
		return b.Check(tx, nil, func(kind, f string, a ...any) { problems = append(problems, kind+": "+fmt.Sprintf(f, a...)) })
	}); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("a failed commit left %v", problems)
	}
}

// freeFollowsTransaction: space freed in a transaction that fails stays
// owned and readable; freed in one that commits, it is free again.
func freeFollowsTransaction(t *testing.T, db *meta.DB, b storage.Backend) {
	before := free(b)
	data := randomBlocks(b, 6, 3)
	loc, err := b.Write(data)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, b, loc)
	boom := errors.New("boom")
	err = db.Update(func(tx *meta.Tx) error {
		if err := b.Free(tx, loc); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v", err)
	}
	p := make([]byte, len(data))
	if err := b.ReadAt(loc, p, 0); err != nil || !bytes.Equal(p, data) {
		t.Fatalf("after a failed free the data is gone (%v)", err)
	}
	if got := free(b); got != before-6 {
		t.Fatalf("after a failed free %d free, want %d", got, before-6)
	}
	if err := db.Update(func(tx *meta.Tx) error { return b.Free(tx, loc) }); err != nil {
		t.Fatal(err)
	}
	if got := free(b); got != before {
		t.Fatalf("after free %d free, want %d", got, before)
	}
}

func noSpace(t *testing.T, _ *meta.DB, b storage.Backend) {
	total, _ := b.Space()
	chunk := int(min(total/4+1, 256))
	for i := int64(0); i <= total; i += int64(chunk) {
		if _, err := b.Write(make([]byte, chunk*b.BlockSize())); err != nil {
			if !errors.Is(err, storage.ErrNoSpace) {
				t.Fatalf("a full backend answered %v, want ErrNoSpace", err)
			}
			return
		}
	}
	t.Fatalf("%d blocks written to a backend of %d", total+int64(chunk), total)
}

func shortLocation(t *testing.T, db *meta.DB, b storage.Backend) {
	loc, err := b.Write(randomBlocks(b, 2, 4))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, b, loc)
	err = b.ReadAt(loc, make([]byte, 10), int64(2*b.BlockSize()-5))
	if !errors.Is(err, storage.ErrShortLocation) {
		t.Fatalf("a read past the location's end gave %v, want ErrShortLocation", err)
	}
}

func checkFindsLeakAndOverlap(t *testing.T, db *meta.DB, b storage.Backend) {
	a, err := b.Write(randomBlocks(b, 2, 5))
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Write(randomBlocks(b, 2, 6))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, b, meta.AppendExtents(append(storage.Location(nil), a...), c))
	check := func(used []storage.Owned) string {
		var kinds []string
		if err := db.View(func(tx *meta.Tx) error {
			return b.Check(tx, used, func(kind, _ string, _ ...any) { kinds = append(kinds, kind) })
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(kinds, ",")
	}
	owned := func(loc storage.Location, who string) []storage.Owned {
		var out []storage.Owned
		for _, e := range loc {
			out = append(out, storage.Owned{Extent: e, Owner: who})
		}
		return out
	}
	if got := check(append(owned(a, "x"), owned(c, "y")...)); got != "" {
		t.Fatalf("a consistent store has problems: %s", got)
	}
	if got := check(owned(a, "x")); !strings.Contains(got, "leak") {
		t.Fatalf("space committed and owned by no one was not reported: %q", got)
	}
	if got := check(append(append(owned(a, "x"), owned(c, "y")...), owned(a, "z")...)); !strings.Contains(got, "overlap") {
		t.Fatalf("space owned twice was not reported: %q", got)
	}
}

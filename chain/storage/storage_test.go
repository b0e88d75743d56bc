package storage_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// storage.go holds, besides the Backend interface (whose conformance suite,
// storagetest, runs in memstore's and pagestore's tests), two helpers the
// backends and the wear accounts share: Blocks and CheckCover.

func ext(start, n int64) meta.Extent { return meta.Extent{Start: start, Len: n} }

func owned(owner string, start, n int64) storage.Owned {
	return storage.Owned{Extent: ext(start, n), Owner: owner}
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		loc  storage.Location
		want int64
	}{
		{nil, 0},
		{storage.Location{ext(5, 3)}, 3},
		{storage.Location{ext(0, 1), ext(100, 7), ext(1<<40, 1<<20)}, 1 + 7 + 1<<20},
	} {
		if got := storage.Blocks(tc.loc); got != tc.want {
			t.Errorf("Blocks(%v) = %d, want %d", tc.loc, got, tc.want)
		}
	}
}

// problem is one report of CheckCover: its kind and a piece of its text.
type problem struct{ kind, text string }

func TestCheckCover(t *testing.T) {
	for _, tc := range []struct {
		name       string
		used       []storage.Owned
		free       []meta.Extent
		first, end int64
		want       []problem
	}{
		{name: "exact tiling, unsorted",
			used:  []storage.Owned{owned("v2", 30, 10), owned("v1", 10, 10)},
			free:  []meta.Extent{ext(20, 10)},
			first: 10, end: 40},
		{name: "empty range", first: 7, end: 7},
		{name: "nothing owned nor free",
			first: 0, end: 8,
			want: []problem{{"leak", "[0,8)"}}},
		{name: "gap between extents",
			used:  []storage.Owned{owned("v1", 0, 10)},
			free:  []meta.Extent{ext(15, 5)},
			first: 0, end: 20,
			want: []problem{{"leak", "[10,15)"}}},
		{name: "leak at the start",
			used:  []storage.Owned{owned("v1", 4, 6)},
			first: 2, end: 10,
			want: []problem{{"leak", "[2,4)"}}},
		{name: "leak at the end",
			used:  []storage.Owned{owned("v1", 0, 6)},
			first: 0, end: 10,
			want: []problem{{"leak", "[6,10)"}}},
		{name: "owned twice",
			used:  []storage.Owned{owned("v1", 0, 10), owned("v2", 5, 5)},
			first: 0, end: 10,
			want: []problem{{"overlap", "v2"}}},
		{name: "owned and free",
			used:  []storage.Owned{owned("v1", 0, 10)},
			free:  []meta.Extent{ext(8, 4)},
			first: 0, end: 12,
			want: []problem{{"overlap", "free list"}}},
		{name: "past the end",
			used:  []storage.Owned{owned("v1", 0, 12)},
			first: 0, end: 10,
			want: []problem{{"overlap", "past the device end 10"}}},
		{name: "below the first block",
			used:  []storage.Owned{owned("v1", 0, 10)},
			first: 5, end: 10,
			want: []problem{{"overlap", "v1"}}},
		{name: "overlap then gap: both found",
			used:  []storage.Owned{owned("v1", 0, 10), owned("v2", 9, 3), owned("v3", 20, 5)},
			first: 0, end: 25,
			want: []problem{{"overlap", "[9,12) of v2"}, {"leak", "[12,20)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usedBefore := slices.Clone(tc.used)
			var got []problem
			storage.CheckCover(tc.used, tc.free, tc.first, tc.end, "test", func(kind, format string, args ...any) {
				got = append(got, problem{kind, fmt.Sprintf(format, args...)})
			})
			if len(got) != len(tc.want) {
				t.Fatalf("problems %v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				if got[i].kind != w.kind || !strings.Contains(got[i].text, w.text) || !strings.HasPrefix(got[i].text, "test ") {
					t.Errorf("problem %d: %v, want kind %q mentioning %q", i, got[i], w.kind, w.text)
				}
			}
			// The caller's slice is not reordered.
			if !slices.Equal(tc.used, usedBefore) {
				t.Errorf("CheckCover reordered used: %v -> %v", usedBefore, tc.used)
			}
		})
	}
}

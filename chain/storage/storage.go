// Package storage is the seam between the store and the medium that keeps
// encoded chunks. The store asks a Backend to keep some bytes and gets back
// a Location; it records the location in the metadata transaction that makes
// the data part of a version, reads ranges back through it, and frees it in
// the transaction that drops the last version needing it.
//
// What a Backend promises (docs/ARCHITECTURE.md says the same at length):
//   - Atomicity with the metadata. Space written is only reserved until
//     Commit, called inside the metadata transaction that records it; if
//     that transaction fails, or the process dies first, the space is not
//     the store's: Release gives it back at once, and Recover at the next
//     open gives back what a crash left. Free, also inside a transaction,
//     takes effect only if the transaction commits.
//   - Ordering. Bytes written are readable as soon as Write returns. Freed
//     space is discarded (trimmed) before any later Write can be handed it.
//   - Durability. Written bytes are durable after Sync; the store syncs
//     before it commits anything that points at them when asked to
//     (fsync), and at close.
//   - Errors. A full medium answers ErrNoSpace (wrapped); other errors
//     carry what failed. A Backend never panics on a Location it did not
//     hand out: it returns an error.
//
// Wear accounting is not part of the seam: the simulated SSD counts the
// pages written to it as any SSD would, and package wear adds what a plain
// filesystem would have written (the shadow) and the metadata estimate.
package storage

import (
	"errors"
	"sort"

	"github.com/ckptfs/ckptfs/meta"
)

// Location says where a backend keeps a piece of data: runs of block
// addresses, in data order. It is what the metadata records
// (meta.Version.Pack). The store joins the locations of consecutive writes
// and merges runs whose addresses touch (meta.AppendExtents), so a backend
// must address its space such that a merged run names the same blocks: a
// device's page numbers do; an object store names object k's blocks from
// k<<32 on, so that no two objects' runs ever touch.
type Location = []meta.Extent

// ErrNoSpace is returned (wrapped) when the medium is full.
var ErrNoSpace = meta.ErrNoSpace

// ErrShortLocation is returned (wrapped) by ReadAt for a range past the
// end of a location: the metadata pointing there is damaged.
var ErrShortLocation = errors.New("range past the end of its location")

// Backend keeps encoded bytes. Safe for concurrent use.
type Backend interface {
	// BlockSize is the unit of space: Write takes whole blocks, Locations
	// count blocks.
	BlockSize() int
	// Write keeps data (a whole number of blocks) in newly reserved space
	// and says where. The space is reserved, not yet the store's: Commit
	// makes it so, Release gives it back.
	Write(data []byte) (Location, error)
	// ReadAt fills p with the bytes at byte offset off of the data kept at
	// loc (its blocks read in order as one stream).
	ReadAt(loc Location, p []byte, off int64) error
	// Commit makes reserved space permanent, as part of tx.
	Commit(tx *meta.Tx, loc Location) error
	// Free gives back committed space, as part of tx: once tx commits, the
	// content is discarded and the space may be handed out again.
	Free(tx *meta.Tx, loc Location) error
	// Release gives back space that was written but never committed.
	Release(loc Location)
	// Recover runs once at open: after an unclean stop (clean false), it
	// discards what writes that never committed left behind.
	Recover(tx *meta.Tx, clean bool) error
	// Space reports the blocks the backend can hold and how many are free.
	Space() (total, free int64)
	// Check reports, through problem, space that is owned twice, or
	// neither owned by a version (used) nor free.
	Check(tx *meta.Tx, used []Owned, problem func(kind, format string, args ...any)) error
	// Sync makes written bytes durable.
	Sync() error
}

// Discarder is a backend that can drop the content of part of a reserved
// location before Release gives the whole back (a trim: the simulated SSD
// then stops copying those pages in garbage collection).
type Discarder interface {
	Discard(loc Location)
}

// Owned is space that a version (named by Owner) holds, for Check.
type Owned struct {
	meta.Extent
	Owner string
}

// Blocks is the number of blocks of a location.
func Blocks(loc Location) int64 {
	var n int64
	for _, e := range loc {
		n += e.Len
	}
	return n
}

// CheckCover checks that used and free extents tile [first, end) exactly:
// overlaps and leaks are reported through problem.
func CheckCover(used []Owned, free []meta.Extent, first, end int64, what string, problem func(kind, format string, args ...any)) {
	all := append([]Owned(nil), used...)
	for _, e := range free {
		all = append(all, Owned{Extent: e, Owner: "free list"})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	pos := first
	for _, u := range all {
		if u.Start < pos {
			problem("overlap", "%s pages [%d,%d) of %s overlap the previous extent", what, u.Start, u.End(), u.Owner)
		} else if u.Start > pos {
			problem("leak", "%s pages [%d,%d) are neither free nor owned", what, pos, u.Start)
		}
		pos = max(pos, u.End())
	}
	if pos < end {
		problem("leak", "%s pages [%d,%d) are neither free nor owned", what, pos, end)
	} else if pos > end {
		problem("overlap", "%s extents run past the device end %d", what, end)
	}
}

// Source is where a read-only store's packs are read from (a replica's
// bucket, chain/remote): blocks, read by location.
type Source interface {
	BlockSize() int
	ReadAt(loc Location, p []byte, off int64) error
}

// SparseReader is a Backend whose reads cost by the byte read, so that a
// reader skipping parts of a record should read only what it needs: a
// replica fetching from the object store. ReadAtSparse reads like ReadAt,
// without the neighbouring bytes or the read-ahead ReadAt brings along.
// The local device reads whole records instead: there, gaps cost more
// than the bytes they skip.
type SparseReader interface {
	ReadAtSparse(loc Location, p []byte, off int64) error
}

// ReadOnly is a Backend that reads from src and refuses writes with
// errWrite: it owns no space, so there is nothing to free, recover or
// check. It is a SparseReader where src is.
func ReadOnly(src Source, errWrite error) Backend {
	if _, ok := src.(SparseReader); ok {
		return readOnlySparse{readOnly{src, errWrite}}
	}
	return readOnly{src, errWrite}
}

type readOnly struct {
	Source
	errWrite error
}

type readOnlySparse struct{ readOnly }

func (r readOnlySparse) ReadAtSparse(loc Location, p []byte, off int64) error {
	return r.Source.(SparseReader).ReadAtSparse(loc, p, off)
}

func (r readOnly) Write([]byte) (Location, error)                                        { return nil, r.errWrite }
func (r readOnly) Commit(*meta.Tx, Location) error                                       { return r.errWrite }
func (r readOnly) Free(*meta.Tx, Location) error                                         { return nil }
func (r readOnly) Release(Location)                                                      {}
func (r readOnly) Recover(*meta.Tx, bool) error                                          { return nil }
func (r readOnly) Space() (total, free int64)                                            { return 1, 0 }
func (r readOnly) Sync() error                                                           { return nil }
func (r readOnly) Check(*meta.Tx, []Owned, func(kind, format string, args ...any)) error { return nil }

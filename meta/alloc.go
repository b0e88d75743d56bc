package meta

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ckptfs/ckptfs/meta/extent"
)

// ErrNoSpace reports that the device has too few free pages.
var ErrNoSpace = errors.New("no space left on device")

// ErrBadExtent reports an extent that is not where the free list says it
// should be: a double free or a commit of pages that were not reserved.
var ErrBadExtent = errors.New("extent not in the expected state")

// Space names one free list: the store's device or the shadow device.
type Space int

const (
	DeviceSpace Space = iota
	ShadowSpace
)

func (s Space) bucket() []byte {
	if s == ShadowSpace {
		return bucketShadowMap
	}
	return bucketFree
}

// Allocator hands out device logical pages. The persisted free list is the
// truth after a restart; in memory the allocator also subtracts reservations
// of in-flight writes, which become permanent only when a transaction
// commits them. Pages reserved by a process that dies are thus free again
// when the store is reopened: a crash never leaks space.
type Allocator struct {
	space Space
	base  int64
	pages int64

	mu   sync.Mutex
	free extent.Set // persisted free list minus reservations
}

// NewAllocator loads the free list of space, which manages the pages
// [base, base+pages). A new store starts with all of them free.
func NewAllocator(db *DB, space Space, base, pages int64) (*Allocator, error) {
	a := &Allocator{space: space, base: base, pages: pages}
	err := db.Update(func(tx *Tx) error {
		initKey := fmt.Sprintf("alloc_init_%d", space)
		if tx.Counter(initKey) == 0 {
			if err := tx.AddCounter(initKey, 1); err != nil {
				return err
			}
			if pages > 0 {
				return tx.bucket(space.bucket()).Put(u64key(uint64(base)), u64key(uint64(pages)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("initialise free list: %w", err)
	}
	err = db.View(func(tx *Tx) error {
		exts, err := tx.FreeExtents(space)
		if err != nil {
			return err
		}
		for _, e := range exts {
			if e.Start < base || e.End() > base+pages {
				return fmt.Errorf("free extent %v outside [%d,%d): %w", e, base, base+pages, ErrBadExtent)
			}
			if err := a.free.Insert(e); err != nil {
				return fmt.Errorf("free list: %v: %w", err, ErrBadExtent)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load free list: %w", err)
	}
	return a, nil
}

// FreePages is the number of pages neither allocated nor reserved.
func (a *Allocator) FreePages() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.free.Pages()
}

// Pages is the number of pages the allocator manages.
func (a *Allocator) Pages() int64 { return a.pages }

// Reserve takes n pages out of the free set, as few extents as it can, lowest
// addresses first. Nothing is persisted: Commit makes it permanent, Unreserve
// gives it back.
func (a *Allocator) Reserve(n int64) ([]Extent, error) {
	if n <= 0 {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.free.Pages() < n {
		return nil, fmt.Errorf("reserve %d pages (%d free): %w", n, a.free.Pages(), ErrNoSpace)
	}
	return a.free.TakeFit(n), nil
}

// Unreserve returns reserved pages that will not be committed.
func (a *Allocator) Unreserve(exts []Extent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range exts {
		if err := a.free.Insert(e); err != nil {
			panic(fmt.Sprintf("allocator: unreserve %v: %v", e, err)) // a caller bug, not bad data
		}
	}
}

// Commit removes reserved extents from the persisted free list.
func (a *Allocator) Commit(tx *Tx, exts []Extent) error {
	for _, e := range exts {
		if err := tx.removeFree(a.space, e); err != nil {
			return fmt.Errorf("commit extent %v: %w", e, err)
		}
	}
	return nil
}

// Free returns allocated extents to the free list, in the database now and
// in memory once tx is durable (OnDurable): they are handed out again only
// when a power loss can no longer bring back the file that held them.
func (a *Allocator) Free(tx *Tx, exts []Extent) error {
	for _, e := range exts {
		if e.Start < a.base || e.End() > a.base+a.pages || e.Len <= 0 {
			return fmt.Errorf("free extent %v outside the device: %w", e, ErrBadExtent)
		}
		if err := tx.addFree(a.space, e); err != nil {
			return fmt.Errorf("free extent %v: %w", e, err)
		}
	}
	cp := append([]Extent(nil), exts...)
	tx.OnDurable(func() { a.Unreserve(cp) })
	return nil
}

// CheckMemory reports, through problem, pages the allocator would hand out
// that the persisted free list in tx does not hold: a drift of its memory
// from the store, which would fail every later commit of those pages (or
// hand one file's pages to another). Memory may hold fewer free pages than
// the database (reservations, frees not yet durable), never more.
func (a *Allocator) CheckMemory(tx *Tx, problem func(format string, args ...any)) error {
	persisted, err := tx.FreeExtents(a.space)
	if err != nil {
		return err
	}
	a.mu.Lock()
	mem := append([]Extent(nil), a.free.Extents()...)
	a.mu.Unlock()
	j := 0
	for _, e := range mem {
		for j < len(persisted) && persisted[j].End() <= e.Start {
			j++
		}
		if j == len(persisted) || persisted[j].Start > e.Start || persisted[j].End() < e.End() {
			problem("free in memory %v, not in one free extent of the store (%s)", e, nearExtent(persisted, j))
		}
	}
	return nil
}

func nearExtent(exts []Extent, i int) string {
	if i < len(exts) {
		return fmt.Sprintf("the next is %v", exts[i])
	}
	return "none follows"
}

// FreeExtents lists the persisted free list of space in address order.
func (tx *Tx) FreeExtents(space Space) ([]Extent, error) {
	var out []Extent
	err := tx.tx.Bucket(space.bucket()).ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) != 8 {
			return fmt.Errorf("free extent record: %w", ErrCorruptRecord)
		}
		out = append(out, Extent{Start: int64(keyU64(k)), Len: int64(keyU64(v))})
		return nil
	})
	return out, err
}

func (tx *Tx) putFree(space Space, e Extent) error {
	return tx.bucket(space.bucket()).Put(u64key(uint64(e.Start)), u64key(uint64(e.Len)))
}

// addFree inserts e into the persisted free list, merging with neighbours:
// the list holds no two touching extents, as the allocator's memory does
// not, so that a run memory hands out is inside one record.
func (tx *Tx) addFree(space Space, e Extent) error {
	b := tx.bucket(space.bucket())
	c := b.Cursor()
	k, v := c.Seek(u64key(uint64(e.Start)))
	var next *Extent
	if k != nil {
		next = &Extent{Start: int64(keyU64(k)), Len: int64(keyU64(v))}
		if next.Start < e.End() {
			return fmt.Errorf("overlaps free extent %v: %w", *next, ErrBadExtent)
		}
	}
	if pk, pv := prevItem(c, k); pk != nil {
		prev := Extent{Start: int64(keyU64(pk)), Len: int64(keyU64(pv))}
		if prev.End() > e.Start {
			return fmt.Errorf("overlaps free extent %v: %w", prev, ErrBadExtent)
		}
		if prev.End() == e.Start {
			e = Extent{Start: prev.Start, Len: prev.Len + e.Len}
		}
	}
	if next != nil && next.Start == e.End() {
		e.Len += next.Len
		if err := b.Delete(u64key(uint64(next.Start))); err != nil {
			return err
		}
	}
	return tx.putFree(space, e)
}

// removeFree takes e out of the persisted free extent that contains it.
func (tx *Tx) removeFree(space Space, e Extent) error {
	b := tx.bucket(space.bucket())
	c := b.Cursor()
	k, v := c.Seek(u64key(uint64(e.Start)))
	if k == nil || int64(keyU64(k)) > e.Start {
		k, v = prevItem(c, k)
	}
	if k == nil {
		return fmt.Errorf("not free: %w", ErrBadExtent)
	}
	have := Extent{Start: int64(keyU64(k)), Len: int64(keyU64(v))}
	if e.Start < have.Start || e.End() > have.End() {
		return fmt.Errorf("not inside free extent %v: %w", have, ErrBadExtent)
	}
	if err := b.Delete(k); err != nil {
		return err
	}
	if e.Start > have.Start {
		if err := tx.putFree(space, Extent{Start: have.Start, Len: e.Start - have.Start}); err != nil {
			return err
		}
	}
	if e.End() < have.End() {
		return tx.putFree(space, Extent{Start: e.End(), Len: have.End() - e.End()})
	}
	return nil
}

// ShadowExtents returns the shadow device pages of an inode's content, in
// file order (the plain filesystem the shadow device models).
func (tx *Tx) ShadowExtents(ino Ino) ([]Extent, error) {
	b := tx.tx.Bucket(bucketInodes).Get(shadowKey(ino))
	if b == nil {
		return nil, nil
	}
	r := recordReader{b: b}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return nil, fmt.Errorf("shadow extents of %d: %w", ino, ErrCorruptRecord)
	}
	out := make([]Extent, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, Extent{Start: r.varint(), Len: r.varint()})
	}
	if r.err != nil {
		return nil, fmt.Errorf("shadow extents of %d: %w", ino, r.err)
	}
	return out, nil
}

// PutShadowExtents records an inode's shadow pages (nil deletes the record).
func (tx *Tx) PutShadowExtents(ino Ino, exts []Extent) error {
	b := tx.bucket(bucketInodes)
	if len(exts) == 0 {
		return b.Delete(shadowKey(ino))
	}
	w := recordWriter{}
	w.uvarint(uint64(len(exts)))
	for _, e := range exts {
		w.varint(e.Start)
		w.varint(e.Len)
	}
	return b.Put(shadowKey(ino), w.b)
}

// ForEachShadow calls fn for every inode's shadow extents.
func (tx *Tx) ForEachShadow(fn func(Ino, []Extent) error) error {
	return tx.tx.Bucket(bucketInodes).ForEach(func(k, _ []byte) error {
		if !isShadowKey(k) {
			return nil // an inode record or a directory entry
		}
		exts, err := tx.ShadowExtents(Ino(keyU64(k)))
		if err != nil {
			return err
		}
		return fn(Ino(keyU64(k)), exts)
	})
}

// shadowKey is the key of an inode's shadow extents: ino (8) ‖ 1, beside
// the inode's record (ino (8)), so that a commit, which changes both,
// rewrites one leaf.
func shadowKey(ino Ino) []byte { return append(u64key(uint64(ino)), tagShadow) }

func isShadowKey(k []byte) bool { return len(k) == 9 && k[8] == tagShadow }

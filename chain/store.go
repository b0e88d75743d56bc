package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

var errCorruptManifest = errors.New("corrupt manifest")

// DefaultCacheBytes is the memory a store gives plain chunks by default
// (see plaincache.DefaultBytes).
const DefaultCacheBytes = plaincache.DefaultBytes

// Options configure a Store.
type Options struct {
	Policy policy.Policy
	// Layout is used when the store is new; an existing store keeps its own.
	Layout policy.Layout
	// MetaPages is the size of the device region that metadata writes are
	// accounted to (the estimate of bbolt's page writes). 0: 1/256 of the
	// device, at least 64 pages.
	MetaPages int64
	// CacheBytes bounds the memory for plain chunks: references kept for
	// the next save of each family, and rebuilt chunks for reads. 0:
	// DefaultCacheBytes.
	CacheBytes int64
	// Workers encode and decode chunks in parallel. 0: GOMAXPROCS.
	Workers int
	// Now supplies timestamps (tests fix it). nil: time.Now.
	Now func() time.Time
}

// Store is a ckptfs store: metadata, device, shadow device and policy.
type Store struct {
	db       *meta.DB
	dev      Device
	shadow   Device
	alloc    *meta.Allocator
	shAlloc  *meta.Allocator
	layout   policy.Layout
	pageSize int
	cache    *plaincache.Cache
	refs     *plaincache.Tier
	workers  int
	now      func() time.Time

	policyMu sync.RWMutex
	pol      policy.Policy

	metaPages  int64
	metaCursor int64 // next page of the metadata region to account to
	shMetaCur  int64
	metaMu     sync.Mutex
	metaTotal  atomic.Int64 // metadata pages accounted on the device
	shMetaTot  atomic.Int64

	nextVersion atomic.Uint64

	jobs      chan *chunkJob // to the encode workers
	closeOnce sync.Once

	pinMu    sync.Mutex
	pins     map[meta.VersionID]int
	deferred map[meta.VersionID]bool // pinned versions whose release waits

	pendingMu sync.RWMutex
	pending   map[meta.VersionID]*Pending // finished, not committed, readable
}

// NewStore assembles a store from an open metadata database and two devices
// of equal geometry: dev keeps the data, shadow only counts what a plain
// filesystem would have written.
func NewStore(db *meta.DB, dev, shadow Device, opts Options) (*Store, error) {
	if dev.PageSize() != shadow.PageSize() || dev.LogicalPages() != shadow.LogicalPages() {
		return nil, fmt.Errorf("device and shadow differ in geometry")
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, dev: dev, shadow: shadow, pageSize: dev.PageSize(), pol: opts.Policy,
		workers: opts.Workers, now: opts.Now, pins: map[meta.VersionID]int{},
		deferred: map[meta.VersionID]bool{}, pending: map[meta.VersionID]*Pending{}}
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.now == nil {
		s.now = time.Now
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	tier := cacheBytes / 8 * plaincache.TierEighths
	s.refs = plaincache.NewTier(tier)
	s.cache = plaincache.NewCache(cacheBytes - tier)
	s.metaPages = opts.MetaPages
	if s.metaPages <= 0 {
		s.metaPages = max(64, dev.LogicalPages()/256)
	}
	if s.metaPages >= dev.LogicalPages() {
		return nil, fmt.Errorf("device of %d pages too small for a %d-page metadata region", dev.LogicalPages(), s.metaPages)
	}
	if err := s.loadLayout(opts.Layout); err != nil {
		return nil, err
	}
	var err error
	data := dev.LogicalPages() - s.metaPages
	if s.alloc, err = meta.NewAllocator(db, meta.DeviceSpace, s.metaPages, data); err != nil {
		return nil, err
	}
	if s.shAlloc, err = meta.NewAllocator(db, meta.ShadowSpace, s.metaPages, data); err != nil {
		return nil, err
	}
	db.SetAccount(s.accountMetadata)
	s.startWorkers()
	if err := s.recover(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the workers. The caller closes the database and devices.
func (s *Store) Close() {
	s.closeOnce.Do(func() { close(s.jobs) })
}

// loadLayout reads the store's chunk layout, or records l for a new store.
func (s *Store) loadLayout(l policy.Layout) error {
	return s.db.Update(func(tx *meta.Tx) error {
		if b := tx.Config("layout"); b != nil {
			if err := json.Unmarshal(b, &s.layout); err != nil {
				return fmt.Errorf("store layout: %w", err)
			}
		} else {
			if l.ChunkElems <= 0 || l.RawChunk <= 0 {
				l = policy.DefaultLayout()
			}
			s.layout = l
			b, _ := json.Marshal(l)
			if err := tx.SetConfig("layout", b); err != nil {
				return err
			}
		}
		if s.layout.ChunkElems <= 0 || s.layout.RawChunk <= 0 || s.layout.ChunkElems > 16<<20 || s.layout.RawChunk > 64<<20 {
			return fmt.Errorf("store layout %+v out of range", s.layout)
		}
		s.nextVersion.Store(tx.Counter("next_version"))
		if tx.Counter("created_ns") == 0 {
			if err := tx.SetCounter("created_ns", uint64(s.now().UnixNano())); err != nil {
				return err
			}
		}
		if _, err := tx.Inode(meta.RootIno); errors.Is(err, meta.ErrNotFound) {
			now := s.now().UnixNano()
			return tx.PutInode(&meta.Inode{Ino: meta.RootIno, Mode: modeDir | 0o755, Nlink: 2,
				Atime: now, Mtime: now, Ctime: now})
		}
		return nil
	})
}

// recover runs at open. Orphans (unlinked while open) are released: no
// process has them open any more. After an unclean stop, pages reserved by
// uncommitted writes were written but never recorded, so the free list
// already counts them as free; trimming the free list makes the device agree.
func (s *Store) recover() error {
	clean := s.db.WasClean()
	if !clean {
		logrus.Warn("store was not closed cleanly: trimming uncommitted pages")
	}
	var free []meta.Extent
	var orphans []meta.Ino
	err := s.db.View(func(tx *meta.Tx) error {
		var err error
		free, err = tx.FreeExtents(meta.DeviceSpace)
		orphans = tx.Orphans()
		return err
	})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, e := range free {
		if clean {
			break
		}
		if err := s.dev.Trim(e.Start, e.Len); err != nil {
			return fmt.Errorf("recover: trim %v: %w", e, err)
		}
	}
	for _, ino := range orphans {
		if err := s.Update(func(tx *Tx) error { return tx.dropInode(ino) }); err != nil {
			return fmt.Errorf("recover: release orphan %d: %w", ino, err)
		}
	}
	return nil
}

// Policy returns the coding policy for new versions.
func (s *Store) Policy() policy.Policy {
	s.policyMu.RLock()
	defer s.policyMu.RUnlock()
	return s.pol
}

// SyncData makes committed content durable (fsync): device pages and
// metadata. The simulators' statistics are saved by Sync.
func (s *Store) SyncData() error {
	if err := s.dev.SyncContent(); err != nil {
		return fmt.Errorf("sync device: %w", err)
	}
	return s.db.Sync()
}

// Sync makes everything durable: device content, the FTL state (statistics)
// of both devices and metadata.
func (s *Store) Sync() error {
	if err := s.dev.Sync(); err != nil {
		return fmt.Errorf("sync device: %w", err)
	}
	if err := s.shadow.Sync(); err != nil {
		return fmt.Errorf("sync shadow device: %w", err)
	}
	return s.db.Sync()
}

// accountMetadata charges bbolt's page writes to the metadata region of the
// device, as a ring, so that rewriting metadata invalidates old pages as a
// real log-structured metadata area would.
func (s *Store) accountMetadata(pages int64) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.metaTotal.Add(pages)
	for pages > 0 {
		n := min(pages, s.metaPages-s.metaCursor)
		if err := s.dev.Account(s.metaCursor, n); err != nil {
			logrus.WithError(err).Warn("account metadata pages")
		}
		s.metaCursor = (s.metaCursor + n) % s.metaPages
		pages -= n
	}
}

// accountShadowMetadata charges the estimate of a plain filesystem's
// metadata writes (inode and directory blocks, journal) to the shadow.
func (s *Store) accountShadowMetadata(pages int64) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.shMetaTot.Add(pages)
	for pages > 0 {
		n := min(pages, s.metaPages-s.shMetaCur)
		if err := s.shadow.Account(s.shMetaCur, n); err != nil {
			logrus.WithError(err).Warn("account shadow metadata pages")
		}
		s.shMetaCur = (s.shMetaCur + n) % s.metaPages
		pages -= n
	}
}

// newVersionID hands out a version number without a transaction; commit
// records the highest number used, so numbers of committed versions are
// never reused.
func (s *Store) newVersionID() meta.VersionID {
	return meta.VersionID(s.nextVersion.Add(1))
}

// Tx is a store transaction: metadata changes plus the device work that must
// follow a successful commit (trims), in the right order.
type Tx struct {
	*meta.Tx
	s        *Store
	rollback []func() // undo in-memory reservations if the commit fails
}

// Update runs fn in one metadata transaction.
func (s *Store) Update(fn func(tx *Tx) error) error {
	var tx *Tx
	err := s.db.Update(func(mtx *meta.Tx) error {
		tx = &Tx{Tx: mtx, s: s}
		return fn(tx)
	})
	if err != nil && tx != nil {
		for _, undo := range tx.rollback {
			undo()
		}
	}
	return err
}

// View runs fn in a read-only metadata transaction.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(mtx *meta.Tx) error { return fn(&Tx{Tx: mtx, s: s}) })
}

// freeExtents returns device pages to the free list. The trim is queued
// before the allocator's own commit hook, so pages are trimmed before any
// other writer can be handed them.
func (tx *Tx) freeExtents(exts []meta.Extent) error {
	if len(exts) == 0 {
		return nil
	}
	dev := tx.s.dev
	cp := append([]meta.Extent(nil), exts...)
	tx.OnCommit(func() {
		for _, e := range cp {
			if err := dev.Trim(e.Start, e.Len); err != nil {
				logrus.WithError(err).Warnf("trim %d pages at %d", e.Len, e.Start)
			}
		}
	})
	return tx.s.alloc.Free(tx.Tx, exts)
}

// Age is the time since the store was created.
func (s *Store) Age() time.Duration {
	var created int64
	_ = s.db.View(func(tx *meta.Tx) error { created = int64(tx.Counter("created_ns")); return nil })
	if created == 0 {
		return 0
	}
	return s.now().Sub(time.Unix(0, created))
}

// StoredPages is the device pages of every version kept (the paper's useful
// storage).
func (s *Store) StoredPages() (int64, error) {
	var pages int64
	err := s.db.View(func(tx *meta.Tx) error {
		return tx.ForEachVersion(func(v *meta.Version) error { pages += v.PackPages(); return nil })
	})
	return pages, err
}

// DropCaches forgets every rebuilt plain chunk, so that the next reads
// decode from the device (replay measures restores this way).
func (s *Store) DropCaches() { s.cache.Clear() }

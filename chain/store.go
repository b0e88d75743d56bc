package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

var errCorruptManifest = errors.New("corrupt manifest")

// DefaultCacheBytes is the memory a store gives plain chunks by default
// (see plaincache.DefaultBytes).
const DefaultCacheBytes = plaincache.DefaultBytes

// MountCacheBytes is the memory for plain chunks a mount gives by default.
// It does not follow the machine's RAM: a daemon's memory must stay
// bounded whatever the number and size of the files saved, and the tier a
// RAM-sized budget kept (7/8 of an eighth of RAM) held every file's last
// save, up to GBs (24 files of 100 MB rewritten at once took the daemon to
// 2.6 GB). A save whose reference is not in the tier rebuilds it from the
// device instead: more CPU, the same bytes stored. --cache-mib gives more.
const MountCacheBytes = 64 << 20

// workerScratch is the memory an encode worker holds at a time: one
// chunk's reference (taken from the tier or rebuilt through its chain),
// its encoded bytes and the coder's scratch. Chunks are 256 to 512 KiB
// (policy.DefaultLayout); the plain chunk is its ingest's, counted in
// unflushedBound.
const workerScratch = 2 << 20

// budgetedWorkers is the most workers MemoryBudget counts: past a few, more
// workers share the same pooled buffers (measured: 16 workers held about
// 15 MB more than 2), and counting each core's would set the heap limit of
// a many-core machine's daemon above what it needs.
const budgetedWorkers = 8

// Options configure a Store.
type Options struct {
	Policy policy.Policy
	// Layout is used when the store is new; an existing store keeps its own.
	Layout policy.Layout
	// CacheBytes bounds the memory for plain chunks: references kept for
	// the next save of each family (plaincache.TierBytes of it), and
	// rebuilt chunks for reads. 0: DefaultCacheBytes.
	CacheBytes int64
	// ReadsOnly says that nothing will be saved into the store (a
	// replica): it keeps no reference tier, and reads get all CacheBytes.
	ReadsOnly bool
	// Workers encode and decode chunks in parallel. 0: GOMAXPROCS.
	Workers int
	// EncodeNice lowers the CPU priority of the threads that encode
	// written files (the workers) by this nice value, so that a busy
	// training keeps its cores (priority.go). 0: the same priority as the
	// rest of the process.
	EncodeNice int
	// Now supplies timestamps (tests fix it). nil: time.Now.
	Now func() time.Time
}

// Store is a ckptfs store: metadata, the backend keeping encoded chunks,
// the wear accounts and the coding policy.
type Store struct {
	names *namespace.Namespace // names, attributes, links: Names

	db        *meta.DB
	data      storage.Backend // where encoded chunks live
	wear      *wear.Accounts  // metadata and plain-filesystem accounting
	blockSize int
	layout    policy.Layout
	cache     *plaincache.Cache
	refs      *plaincache.Tier
	workers   int
	now       func() time.Time
	// encodeNice: see Options.EncodeNice.
	encodeNice int

	policyMu sync.RWMutex
	pol      policy.Policy

	nextVersion atomic.Uint64

	jobs        chan *chunkJob // to the encode workers
	closeOnce   sync.Once
	stopFlusher chan struct{} // the shadow's write-back flusher (shadow.go), if running

	resv       reservations // space of accepted, uncommitted writes
	cacheBytes int64
	rebuilt    atomic.Int64 // chunks decoded from the device (reconstruct.go)
	// viewsFromHigh counts view chunks rebuilt from high planes alone (view.go).
	viewsFromHigh atomic.Int64
	// highShare is what a view last read of a split16 chunk, in 1/4096ths
	// of the chunk, for baselines and deltas: the share readHighRecords
	// asks for at once next time.
	highShare [2]atomic.Int64
	// splitForms counts chunks rebuilt in split form (splitform.go).
	splitForms atomic.Int64
	committing committingFamilies
	pinMu      sync.Mutex
	pins       map[meta.VersionID]int
	deferred   map[meta.VersionID]bool // pinned versions whose release waits
	freeing    map[meta.VersionID]bool // freed by a transaction not yet committed
	freedSeq   atomic.Uint64           // versions freed (committed) so far
	// rewriting: versions an online re-coding swaps in by a transaction
	// not yet committed (guardRewrite); reads wait for it (rewritten).
	rewriting map[meta.VersionID]bool
	rewritten *sync.Cond
	// rewrites counts committed swaps that changed a version's bytes (a
	// tier): a chunk rebuilt across one is not cached (chunkPlain).
	rewrites atomic.Uint64
	// readAhead's goroutines hold pins: Close stops and waits for them.
	ahead sync.WaitGroup
	// aheadRunning counts them, across all readers: at most workers;
	// aheadPeak is the most that ran at once.
	aheadRunning, aheadPeak atomic.Int64
	closing                 atomic.Bool

	committed func(meta.VersionID, int64) // told of each commit (OnCommitted)
	// waitingStaged: staging files kept by RecoverStaged, whose commits
	// failed (TakeWaitingStaged).
	waitingStaged []KeptStaged
}

// Names is the store's namespace: inodes, their names, attributes and
// links. Removing a file's last name frees its versions through the store.
func (s *Store) Names() *namespace.Namespace { return s.names }

// NewStore assembles a store from an open metadata database, the backend
// that keeps encoded chunks, and the wear accounts that observe the store
// (nil: nothing accounted beyond what the backend's medium counts).
func NewStore(db *meta.DB, data storage.Backend, accounts *wear.Accounts, opts Options) (*Store, error) {
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, data: data, wear: accounts, blockSize: data.BlockSize(), pol: opts.Policy,
		workers: opts.Workers, encodeNice: opts.EncodeNice, now: opts.Now, pins: map[meta.VersionID]int{},
		deferred: map[meta.VersionID]bool{}, freeing: map[meta.VersionID]bool{}, rewriting: map[meta.VersionID]bool{}}
	s.rewritten = sync.NewCond(&s.pinMu)
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.names = namespace.New(db, s.now, namespace.Hooks{
		Drop:    func(mtx *meta.Tx, n *meta.Inode) error { return (&txn{mtx: mtx, s: s}).dropContent(n) },
		Changed: func() { s.shadowMetadata(1) },
	})
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	s.cacheBytes = cacheBytes
	tier := plaincache.TierBytes(cacheBytes)
	if opts.ReadsOnly {
		tier = 0
	}
	s.refs = plaincache.NewTier(tier)
	s.cache = plaincache.NewCache(cacheBytes - tier)
	if err := s.loadLayout(opts.Layout); err != nil {
		return nil, err
	}
	if s.wear != nil {
		if ps := s.wear.PageSize(); ps%int64(s.blockSize) != 0 {
			return nil, fmt.Errorf("file pages of %d bytes are not whole blocks of %d", ps, s.blockSize)
		}
		db.SetAccount(s.wear.Metadata)
	}
	s.startWorkers()
	if err := s.recover(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the workers. The caller closes the database and devices.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.ahead.Wait()
		close(s.jobs)
		if s.stopFlusher != nil {
			close(s.stopFlusher)
			s.wear.WriteBackAll() // unmount writes back the page cache
		}
	})
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
			// Owned by whoever makes the store, as mke2fs does: a user who
			// mounts a new store of their own may write into it.
			now := s.now().UnixNano()
			return tx.PutInode(&meta.Inode{Ino: meta.RootIno, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
				Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()),
				Atime: now, Mtime: now, Ctime: now})
		}
		return nil
	})
}

// freeUnneeded frees the versions neither live nor needed by another. A
// release that waited for a pin (an ingest coding against the version)
// frees the version when the pin goes; a crash in between leaves it behind.
// Run at open, before any pin exists.
func (s *Store) freeUnneeded() (int, error) {
	var unneeded []meta.VersionID
	err := s.update(func(tx *txn) error {
		unneeded = unneeded[:0]
		err := tx.mtx.ForEachVersion(func(v *meta.Version) error {
			if !v.Live && v.Dependents == 0 {
				unneeded = append(unneeded, v.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range unneeded {
			if err := tx.releaseVersion(id, noClaim); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("free unneeded versions: %w", err)
	}
	return len(unneeded), nil
}

// recover runs at open. Orphans (unlinked while open) are released: no
// process has them open any more. After an unclean stop, the backend gives
// back what uncommitted writes left.
func (s *Store) recover() error {
	clean := s.db.WasClean()
	if !clean {
		logrus.Warn("store was not closed cleanly: trimming uncommitted pages")
	}
	var orphans []meta.Ino
	err := s.db.View(func(tx *meta.Tx) error {
		orphans = tx.Orphans()
		return s.data.Recover(tx, clean)
	})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, ino := range orphans {
		if err := s.Names().Forget(ino); err != nil {
			return fmt.Errorf("recover: release orphan %d: %w", ino, err)
		}
	}
	if !clean {
		n, err := s.freeUnneeded()
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		if n > 0 {
			logrus.Warnf("freed %d versions whose release the crash interrupted", n)
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

// SyncData makes committed content durable (fsync): encoded chunks and
// metadata. The simulators' statistics are saved by medium.Medium.Sync.
func (s *Store) SyncData() error {
	if err := s.data.Sync(); err != nil {
		return fmt.Errorf("sync data: %w", err)
	}
	return s.db.Sync()
}

// shadowMetadata charges a plain filesystem's metadata write of pages.
func (s *Store) shadowMetadata(pages int64) {
	if s.wear != nil {
		s.wear.ShadowMetadata(pages)
	}
}

// newVersionID hands out a version number without a transaction; commit
// records the highest number used, so numbers of committed versions are
// never reused.
func (s *Store) newVersionID() meta.VersionID {
	return meta.VersionID(s.nextVersion.Add(1))
}

// txn is a store transaction: a metadata transaction with the store whose
// in-memory state (pins, caches, backend reservations) follows it.
type txn struct {
	mtx *meta.Tx
	s   *Store
}

// update runs fn in one metadata transaction.
func (s *Store) update(fn func(tx *txn) error) error {
	return s.db.Update(func(mtx *meta.Tx) error { return fn(&txn{mtx: mtx, s: s}) })
}

// updateLogged runs fn in one logged metadata transaction: durable against
// a kill of the daemon when it returns, and on disk with the next synced
// commit, at most a second later (meta.DB.UpdateLogged). A file's commit
// is one: a save does not wait for the disk unless it asks (fsync), as on
// a plain filesystem, and the space its commit frees is reused only after
// that synced commit.
func (s *Store) updateLogged(fn func(tx *txn) error) error {
	return s.db.UpdateLogged(func(mtx *meta.Tx) error { return fn(&txn{mtx: mtx, s: s}) })
}

// view runs fn in a read-only metadata transaction.
func (s *Store) view(fn func(tx *txn) error) error {
	return s.db.View(func(mtx *meta.Tx) error { return fn(&txn{mtx: mtx, s: s}) })
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

// budgetedIngests is how many ingests MemoryBudget counts at once: a mount
// encodes two staged commits at a time (fs), and an fsync or a truncate
// may commit beside them.
const budgetedIngests = 4

// MemoryBudget is the most memory the store's bounded parts hold together:
// the plain chunks (cache and reference tier), the workers' buffers, and
// the ingests' (a staged commit's read buffer and the bytes its ingest has
// not flushed). The daemon's soft heap limit is set above it (cmd/ckptfs),
// so that the collector does not run without end once those fill up.
func (s *Store) MemoryBudget() int64 {
	return s.cacheBytes + int64(min(s.workers, budgetedWorkers))*workerScratch + budgetedIngests*(stagedReadBytes+s.unflushedBound())
}

// PhysicalMemory is the machine's RAM in bytes (1 GiB if unknown).
func PhysicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sirupsen/logrus"
	"os"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrLocked reports a store that another process holds open.
var ErrLocked = errors.New("store is in use by another ckptfs process")

// ErrNotFound reports a missing inode, directory entry, version or family.
var ErrNotFound = errors.New("not found")

// Bucket names. docs/STORE.md describes each record.
var (
	bucketInodes    = []byte("inodes") // and shadow extents and directory entries (format 2)
	bucketXattrs    = []byte("xattrs")
	bucketOrphans   = []byte("orphans")
	bucketVersions  = []byte("versions") // records, segments and chunks (format 2)
	bucketFamilies  = []byte("families")
	bucketFree      = []byte("free")
	bucketCounters  = []byte("counters")
	bucketConfig    = []byte("config")
	bucketShadowMap = []byte("shadowfree")
	allBuckets      = [][]byte{bucketInodes, bucketXattrs, bucketOrphans,
		bucketVersions, bucketFamilies, bucketFree,
		bucketCounters, bucketConfig, bucketShadowMap}
)

var keyClean = []byte("clean")

// Options configure Open.
type Options struct {
	// Account, if set, is told after every committed write transaction how
	// many pages bbolt wrote (an estimate: dirty pages plus the meta page),
	// so that metadata writes reach the simulated device.
	Account func(pages int64)
	// NoSync skips fsync on commit: for throw-away stores (replay, tests).
	NoSync bool
	// LockTimeout bounds the wait for another process's lock (default 1s).
	LockTimeout time.Duration
}

// DB is the metadata store of one ckptfs store directory.
type DB struct {
	bolt     *bolt.DB
	account  func(int64)
	pageSize int64
	wasClean bool

	mu     sync.Mutex // serialises Update so page accounting reads clean deltas
	sealed bool       // Seal was called
}

// Open opens or creates the metadata database at path.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	// O_NOFOLLOW: a meta.db symlink planted in the store directory is
	// refused, not followed to a file of the opener's elsewhere.
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoSync: opts.NoSync,
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			return os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
		}})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open metadata %s: %w", path, err)
	}
	db := &DB{bolt: b, account: opts.Account, pageSize: int64(b.Info().PageSize)}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if err := checkFormat(tx); err != nil {
			return err
		}
		// A store is clean only if the last process closed it; mark it
		// in use until Close says otherwise.
		c := tx.Bucket(bucketConfig)
		v := c.Get(keyClean)
		db.wasClean = v == nil || (len(v) == 1 && v[0] == 1)
		return c.Put(keyClean, []byte{0})
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("initialise metadata %s: %w", path, err)
	}
	return db, nil
}

// ErrSealed: the store is closing and takes no more changes.
var ErrSealed = errors.New("metadata: store is closing")

// Seal refuses every later Update, after waiting for the one running. A
// closing store seals before its devices close, so that no change (such as
// a late FUSE forget) commits without its pages being counted; work it
// refuses is redone at the next open (orphans are released by recovery).
func (db *DB) Seal() {
	db.mu.Lock()
	db.sealed = true
	db.mu.Unlock()
}

// SetAccount replaces the callback told of metadata page writes.
func (db *DB) SetAccount(fn func(pages int64)) {
	db.mu.Lock()
	db.account = fn
	db.mu.Unlock()
}

// WasClean reports whether the previous process closed the store cleanly
// (true for a new store). After an unclean stop, pages written for
// uncommitted files may still be mapped on the device.
func (db *DB) WasClean() bool { return db.wasClean }

// Close marks the store clean and closes it.
func (db *DB) Close() error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConfig).Put(keyClean, []byte{1})
	})
	if cerr := db.bolt.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path is the database file.
func (db *DB) Path() string { return db.bolt.Path() }

// Size is the database file's size in bytes.
func (db *DB) Size() int64 {
	fi, err := os.Stat(db.bolt.Path())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Sync flushes the database file (useful with NoSync).
func (db *DB) Sync() error { return db.bolt.Sync() }

// Tx is one metadata transaction. Changes to in-memory state that mirror the
// database (the allocator's free set) are queued with OnCommit and applied only
// if the transaction commits.
type Tx struct {
	tx       *bolt.Tx
	db       *DB
	rollback []func()
}

// OnCommit runs fn after the transaction commits successfully.
func (tx *Tx) OnCommit(fn func()) { tx.tx.OnCommit(fn) }

// OnRollback runs fn if the transaction does not commit: it undoes an
// in-memory reservation made for a change the database then did not keep.
func (tx *Tx) OnRollback(fn func()) { tx.rollback = append(tx.rollback, fn) }

// Writable reports whether the transaction may change the store.
func (tx *Tx) Writable() bool { return tx.tx.Writable() }

// Update runs fn in a write transaction: all of fn's changes commit, or none.
func (db *DB) Update(fn func(*Tx) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.sealed {
		return ErrSealed
	}
	before := db.pageAlloc()
	var tx *Tx
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		tx = &Tx{tx: btx, db: db}
		return fn(tx)
	})
	if err != nil && tx != nil {
		for _, undo := range tx.rollback {
			undo()
		}
	}
	if err == nil && db.account != nil {
		written := (db.pageAlloc()-before)/db.pageSize + 1 // + the meta page
		db.account(written)
		if logrus.IsLevelEnabled(logrus.TraceLevel) {
			logrus.Tracef("metadata commit: %d pages", written)
		}
	}
	return err
}

func (db *DB) pageAlloc() int64 {
	st := db.bolt.Stats()
	return st.TxStats.GetPageAlloc()
}

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(*Tx) error) error {
	return db.bolt.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, db: db}) })
}

// ViewBetweenUpdates is View with no Update running: every Update has
// either committed before fn's snapshot or starts after fn returns, so what
// fn decides from the snapshot (such as pinning a version it found) is seen
// by every later Update.
func (db *DB) ViewBetweenUpdates(fn func(*Tx) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.View(fn)
}

// Config returns the store's configuration record (nil for a new store).
func (tx *Tx) Config(name string) []byte {
	v := tx.tx.Bucket(bucketConfig).Get([]byte("cfg/" + name))
	return append([]byte(nil), v...)
}

// SetConfig stores a configuration record.
func (tx *Tx) SetConfig(name string, v []byte) error {
	return tx.tx.Bucket(bucketConfig).Put([]byte("cfg/"+name), v)
}

// Counter reads a named counter.
func (tx *Tx) Counter(name string) uint64 {
	v := tx.tx.Bucket(bucketCounters).Get([]byte(name))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// AddCounter adds delta to a named counter (saturating at zero).
func (tx *Tx) AddCounter(name string, delta int64) error {
	v := int64(tx.Counter(name)) + delta
	if v < 0 {
		v = 0
	}
	return tx.tx.Bucket(bucketCounters).Put([]byte(name), u64key(uint64(v)))
}

// SetCounter sets a named counter.
func (tx *Tx) SetCounter(name string, v uint64) error {
	return tx.tx.Bucket(bucketCounters).Put([]byte(name), u64key(v))
}

// Counters returns every counter.
func (tx *Tx) Counters() map[string]uint64 {
	m := map[string]uint64{}
	_ = tx.tx.Bucket(bucketCounters).ForEach(func(k, v []byte) error {
		if len(v) == 8 {
			m[string(k)] = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return m
}

// nextID returns the next number of a sequence (starting at 1).
func (tx *Tx) nextID(name string) (uint64, error) {
	id := tx.Counter(name) + 1
	if id == 1 && name == "next_ino" {
		id = uint64(RootIno) + 1 // the root is created with a fixed number
	}
	return id, tx.tx.Bucket(bucketCounters).Put([]byte(name), u64key(id))
}

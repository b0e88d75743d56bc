package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sirupsen/logrus"
	"os"
	"sync"
	"sync/atomic"
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
	// Journal, if set, is the file of logged updates (UpdateLogged): Open
	// applies what a killed process left in it, and logged updates are
	// then durable against a kill at once and against a power loss at the
	// next synced commit, at most FlushInterval later.
	Journal string
	// FlushInterval bounds how long logged updates wait for a synced
	// commit (default 1s).
	FlushInterval time.Duration
}

// DB is the metadata store of one ckptfs store directory.
type DB struct {
	bolt     *bolt.DB
	account  func(int64)
	pageSize int64
	wasClean bool

	mu     sync.Mutex // serialises updates, and views of logged changes
	sealed bool       // Seal was called

	// Logged updates (Options.Journal). They are applied to open, a write
	// transaction kept open until the next synced commit, and appended to
	// the journal; views see them through open while dirty is set.
	journal  *journal
	open     *bolt.Tx
	redo     []change // the logged changes in open, to apply again after a rollback
	durable  []func() // their OnDurable functions, run after the synced commit
	seq      uint64   // the last journal record written
	dirty    atomic.Bool
	since    time.Time // the oldest logged change not yet synced
	interval time.Duration
	stop     chan struct{}
	stopped  chan struct{}
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
		if opts.Journal != "" {
			if err := db.openJournal(tx, opts.Journal); err != nil {
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
		if db.journal != nil {
			db.journal.close()
		}
		b.Close()
		return nil, fmt.Errorf("initialise metadata %s: %w", path, err)
	}
	if db.journal != nil {
		if err := db.journal.reset(); err != nil {
			logrus.Warnf("metadata %s: %v", path, err)
		}
		db.interval = opts.FlushInterval
		if db.interval <= 0 {
			db.interval = time.Second
		}
		db.stop, db.stopped = make(chan struct{}), make(chan struct{})
		go db.flusher()
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
	if err := db.flushLocked(); err != nil {
		logrus.Errorf("metadata: commit logged changes before closing: %v", err)
	}
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

// Close commits logged changes, marks the store clean and closes it.
func (db *DB) Close() error {
	if db.stop != nil {
		close(db.stop)
		<-db.stopped
	}
	db.mu.Lock()
	err := db.flushLocked()
	db.discardOpen() // what failed to commit is in the journal; bbolt's Close waits for an open writer
	db.mu.Unlock()
	if err == nil {
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketConfig).Put(keyClean, []byte{1})
		})
	}
	if cerr := db.bolt.Close(); err == nil {
		err = cerr
	}
	if db.journal != nil {
		if cerr := db.journal.close(); err == nil {
			err = cerr
		}
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

// Sync commits logged changes and flushes the database file (useful with
// NoSync): what was changed before it survives a power loss.
func (db *DB) Sync() error {
	if err := db.Flush(); err != nil {
		return err
	}
	return db.bolt.Sync()
}

// Tx is one metadata transaction. Changes to in-memory state that mirror the
// database (the allocator's free set) are queued with OnCommit and applied only
// if the transaction commits.
type Tx struct {
	tx       *bolt.Tx
	db       *DB
	readOnly bool     // a view served from the open write transaction
	log      []change // the changes of a logged update
	logging  bool
	synced   bool // RequireSync was called
	commit   []func()
	durable  []func()
	rollback []func()
}

// OnCommit runs fn once the transaction's changes are the store's: when a
// logged update is in the journal, or when a synced update has committed.
// In-memory state that mirrors the database follows it.
func (tx *Tx) OnCommit(fn func()) { tx.commit = append(tx.commit, fn) }

// OnDurable runs fn after the synced commit that holds the transaction
// (at once after OnCommit for a synced update). Freed space is handed out
// again only then: a power loss must not bring back a file whose pages
// another file's data has since overwritten (ext4 reuses blocks freed by a
// transaction only after it commits, for the same reason).
func (tx *Tx) OnDurable(fn func()) { tx.durable = append(tx.durable, fn) }

// OnRollback runs fn if the transaction does not commit: it undoes an
// in-memory reservation made for a change the database then did not keep.
func (tx *Tx) OnRollback(fn func()) { tx.rollback = append(tx.rollback, fn) }

// RequireSync makes a logged update commit synced at once, with every
// logged change before it: one that releases space does, so that the
// space (handed out again only OnDurable) is free at once.
func (tx *Tx) RequireSync() { tx.synced = true }

// Writable reports whether the transaction may change the store.
func (tx *Tx) Writable() bool { return !tx.readOnly && tx.tx.Writable() }

// errReadOnly: a view tried to change the store.
var errReadOnly = errors.New("metadata: change in a read-only transaction")

// wbucket is a bucket written through Tx, so that a logged update records
// its changes and a view served from the open write transaction cannot
// change anything.
type wbucket struct {
	tx    *Tx
	index byte
	*bolt.Bucket
}

func (tx *Tx) bucket(name []byte) wbucket {
	i, err := bucketIndex(name)
	if err != nil {
		panic(err) // a bucket missing from allBuckets is a programming error
	}
	return wbucket{tx: tx, index: i, Bucket: tx.tx.Bucket(name)}
}

// Put stores a copy of value: a logged update's transaction outlives the
// caller's buffers.
func (b wbucket) Put(key, value []byte) error {
	if b.tx.readOnly {
		return errReadOnly
	}
	v := append([]byte{}, value...)
	if b.tx.logging {
		b.tx.log = append(b.tx.log, change{op: opPut, bucket: b.index, key: append([]byte(nil), key...), value: v})
	}
	return b.Bucket.Put(key, v)
}

func (b wbucket) Delete(key []byte) error {
	if b.tx.readOnly {
		return errReadOnly
	}
	if b.tx.logging {
		b.tx.log = append(b.tx.log, change{op: opDelete, bucket: b.index, key: append([]byte(nil), key...)})
	}
	return b.Bucket.Delete(key)
}

// Update runs fn in a write transaction and commits it synced, with every
// logged change before it: all of fn's changes commit, or none.
func (db *DB) Update(fn func(*Tx) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	tx, err := db.run(fn, false)
	if err != nil {
		return err
	}
	return db.commit(tx)
}

// run runs fn on the open write transaction (db.mu held), undoing what fn
// changed if it fails.
func (db *DB) run(fn func(*Tx) error, logging bool) (*Tx, error) {
	if db.sealed {
		return nil, ErrSealed
	}
	tx, err := db.begin(logging)
	if err != nil {
		return nil, err
	}
	if err := fn(tx); err != nil {
		db.undo(tx)
		return nil, err
	}
	return tx, nil
}

// UpdateLogged runs fn in a write transaction that is durable when it
// returns against a kill of the process (through the journal), and
// against a power loss at the next synced commit: any Update, Sync, or
// the flush at most FlushInterval later. Views see its changes at once.
// Without a journal it is Update.
func (db *DB) UpdateLogged(fn func(*Tx) error) error {
	if db.journal == nil {
		return db.Update(fn)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	tx, err := db.run(fn, true)
	if err != nil {
		return err
	}
	if tx.synced || logSize(tx.log) > maxJournalRecord/2 {
		// A record recovery would refuse as too long is committed synced.
		return db.commit(tx)
	}
	if len(tx.log) == 0 { // nothing changed: nothing to log or commit
		runAll(tx.commit)
		if !db.dirty.Load() {
			db.discardOpen()
			runAll(tx.durable)
			return nil
		}
		db.durable = append(db.durable, tx.durable...)
		return nil
	}
	if err := db.journal.append(db.seq+1, tx.log); err != nil {
		db.undo(tx)
		return err
	}
	db.seq++
	if !db.dirty.Load() {
		db.since = time.Now()
	}
	db.redo = append(db.redo, tx.log...)
	db.durable = append(db.durable, tx.durable...)
	db.dirty.Store(true)
	runAll(tx.commit)
	if len(db.redo) > maxRedo || db.journal.size > maxJournal {
		return db.flushLocked()
	}
	return nil
}

// logSize bounds the journal record of changes.
func logSize(changes []change) int {
	n := 8
	for _, c := range changes {
		n += 2 + 2*binary.MaxVarintLen64 + len(c.key) + len(c.value)
	}
	return n
}

// Bounds of what logged updates hold before a synced commit: the open
// transaction keeps their pages in memory.
const (
	maxRedo    = 1 << 14
	maxJournal = 16 << 20
)

// begin returns a Tx on the open write transaction, beginning one if none is.
func (db *DB) begin(logging bool) (*Tx, error) {
	if db.open == nil {
		btx, err := db.bolt.Begin(true)
		if err != nil {
			return nil, fmt.Errorf("begin metadata transaction: %w", err)
		}
		db.open = btx
	}
	return &Tx{tx: db.open, db: db, logging: logging}, nil
}

// undo drops what tx changed and keeps the logged changes before it: bbolt
// cannot roll back part of a transaction, so the whole one goes and they
// are applied again.
func (db *DB) undo(tx *Tx) {
	for _, u := range tx.rollback {
		u()
	}
	db.discardOpen()
	if len(db.redo) == 0 {
		return
	}
	if err := db.reapply(); err != nil {
		// The database no longer holds what views were shown: take no
		// more changes (the journal still has them for the next Open).
		logrus.Errorf("metadata: logged changes lost after a rollback (they are in the journal; restart to recover): %v", err)
		db.sealed = true
		db.discardOpen()
		db.dirty.Store(false) // views read the database as it is
	}
}

func (db *DB) discardOpen() {
	if db.open != nil {
		_ = db.open.Rollback()
		db.open = nil
	}
}

func (db *DB) reapply() error {
	btx, err := db.bolt.Begin(true)
	if err != nil {
		return err
	}
	db.open = btx
	return applyChanges(btx, db.redo)
}

func applyChanges(btx *bolt.Tx, changes []change) error {
	for _, c := range changes {
		b := btx.Bucket(allBuckets[c.bucket])
		var err error
		if c.op == opPut {
			err = b.Put(c.key, append([]byte{}, c.value...))
		} else {
			err = b.Delete(c.key)
		}
		if err != nil {
			return fmt.Errorf("apply journal change to %s: %w", allBuckets[c.bucket], err)
		}
	}
	return nil
}

// commit commits the open write transaction, synced (unless NoSync), with
// tx's changes and every logged change before them, then runs their
// OnCommit functions in order.
func (db *DB) commit(tx *Tx) error {
	btx := db.open
	logged := db.dirty.Load()
	if logged {
		if err := btx.Bucket(bucketConfig).Put(keyJournalSeq, u64key(db.seq)); err != nil {
			db.undo(tx)
			return err
		}
	}
	err := btx.Commit()
	db.open = nil
	if err != nil {
		db.undo(tx) // bbolt rolled back; the logged changes are applied again
		return fmt.Errorf("commit metadata: %w", err)
	}
	durable := append(db.durable, tx.durable...)
	db.durable, db.redo = nil, nil
	db.dirty.Store(false)
	if logged {
		if err := db.journal.reset(); err != nil {
			logrus.Warnf("metadata: %v", err)
		}
	}
	runAll(tx.commit)
	runAll(durable)
	if db.account != nil {
		st := btx.Stats()
		written := st.GetPageAlloc()/db.pageSize + 1 // + the meta page
		db.account(written)
		if logrus.IsLevelEnabled(logrus.TraceLevel) {
			logrus.Tracef("metadata commit: %d pages", written)
		}
	}
	return nil
}

func runAll(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// flushLocked commits the logged changes, if any (db.mu held).
func (db *DB) flushLocked() error {
	if !db.dirty.Load() {
		db.discardOpen()
		return nil
	}
	return db.commit(&Tx{tx: db.open, db: db})
}

// Flush commits the logged changes, synced.
func (db *DB) Flush() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.flushLocked()
}

// flusher commits logged changes at most interval after the first of them.
func (db *DB) flusher() {
	defer close(db.stopped)
	t := time.NewTicker(db.interval / 4)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		}
		if !db.dirty.Load() {
			continue
		}
		db.mu.Lock()
		if db.dirty.Load() && time.Since(db.since) >= db.interval {
			if err := db.flushLocked(); err != nil {
				logrus.Errorf("metadata: commit logged changes: %v", err)
			}
		}
		db.mu.Unlock()
	}
}

// openJournal applies, in tx, the records a killed process left in the
// journal at path, and opens it for appending.
func (db *DB) openJournal(tx *bolt.Tx, path string) error {
	j, data, err := openJournal(path)
	if err != nil {
		return err
	}
	db.journal = j
	cfg := tx.Bucket(bucketConfig)
	var applied uint64
	if v := cfg.Get(keyJournalSeq); len(v) == 8 {
		applied = keyU64(v)
	}
	recs := decodeJournal(data, applied)
	for _, r := range recs {
		if err := applyChanges(tx, r.changes); err != nil {
			return fmt.Errorf("journal record %d: %w", r.seq, err)
		}
		applied = r.seq
	}
	if len(recs) > 0 {
		logrus.Infof("metadata: applied %d logged changes a stopped process left in %s", len(recs), path)
		if err := cfg.Put(keyJournalSeq, u64key(applied)); err != nil {
			return err
		}
	}
	db.seq = applied
	return nil
}

// View runs fn in a read-only transaction. While logged changes wait for
// their synced commit, it runs in the write transaction that holds them.
func (db *DB) View(fn func(*Tx) error) error {
	if db.dirty.Load() {
		db.mu.Lock()
		if db.dirty.Load() {
			defer db.mu.Unlock()
			return fn(&Tx{tx: db.open, db: db, readOnly: true})
		}
		db.mu.Unlock()
	}
	return db.bolt.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, db: db}) })
}

// ViewBetweenUpdates is View with no Update running: every Update has
// either committed before fn's snapshot or starts after fn returns, so what
// fn decides from the snapshot (such as pinning a version it found) is seen
// by every later Update.
func (db *DB) ViewBetweenUpdates(fn func(*Tx) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.dirty.Load() {
		return fn(&Tx{tx: db.open, db: db, readOnly: true})
	}
	return db.bolt.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, db: db}) })
}

// Config returns the store's configuration record (nil for a new store).
func (tx *Tx) Config(name string) []byte {
	v := tx.tx.Bucket(bucketConfig).Get([]byte("cfg/" + name))
	return append([]byte(nil), v...)
}

// SetConfig stores a configuration record.
func (tx *Tx) SetConfig(name string, v []byte) error {
	return tx.bucket(bucketConfig).Put([]byte("cfg/"+name), v)
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
	return tx.bucket(bucketCounters).Put([]byte(name), u64key(uint64(v)))
}

// SetCounter sets a named counter.
func (tx *Tx) SetCounter(name string, v uint64) error {
	return tx.bucket(bucketCounters).Put([]byte(name), u64key(v))
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
	return id, tx.bucket(bucketCounters).Put([]byte(name), u64key(id))
}

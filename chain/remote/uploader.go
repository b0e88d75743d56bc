package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// ErrCorrupt reports an object whose content is not what its name or its
// manifest says.
var ErrCorrupt = errors.New("corrupt remote object")

// Options configure an Uploader.
type Options struct {
	// PieceSize is the most pack bytes per object (0: DefaultPieceSize).
	PieceSize int64
	// Interval is how often the tree of names is compared with the last
	// root when no commit wakes the uploader (renames, deletions). 0: 5 s.
	Interval time.Duration
	// KeepRoots is how many newest roots stay in the bucket, with every
	// object they name (0: 2): a reader that mounted one of them keeps
	// finding its objects while a newer one is written.
	KeepRoots int
	// KeepFor is how long a root replaced by newer ones stays in the
	// bucket, with what it names, beyond the newest KeepRoots: a
	// following reader's open files stay readable (0: no longer).
	KeepFor time.Duration
	// BytesPerSecond caps the upload rate (0: no cap).
	BytesPerSecond int64
	// Writer names this store among the writers of one run: its objects
	// go under writers/<Writer>/ and it publishes members/<Writer>.json
	// (docs/REMOTE.md). "": the store owns the whole prefix, as before.
	Writer string
	// Cut tells what the filesystem holds back from the store now: the
	// earliest close of a file whose commit has not landed (0: none), and
	// the files being written. nil: nothing (an unmounted store).
	Cut func() (oldestClose int64, writing []meta.Ino)
	// Heartbeat is how often a named writer publishes how far its newest
	// root is complete while it is busy (0: 1 s); idle, every 5 s.
	Heartbeat time.Duration
}

func (o *Options) defaults() {
	if o.PieceSize <= 0 {
		o.PieceSize = DefaultPieceSize
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.KeepRoots <= 0 {
		o.KeepRoots = 2
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
}

// idleAfter is how long after its last root a writer counts as idle, and
// idleHeartbeat how often it publishes then.
const (
	idleAfter     = time.Minute
	idleHeartbeat = 5 * time.Second
)

// Uploader copies a store's committed versions to a bucket in the
// background: a version's pieces, then its manifest; once every version of
// a moment is there, a root naming them and the tree of names (the only
// object a reader looks for first). Objects the newest roots no longer
// need are deleted after that.
type Uploader struct {
	store  *chain.Store
	bucket bucket.Bucket // the writer's own objects
	run    bucket.Bucket // the run's prefix: members/ (Writer set)
	st     *state
	o      Options

	wake   chan struct{}
	drain  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	listedRoots bool // nextSeq looked at the bucket's roots

	// What the last member object said (Writer set), and when the last
	// root was written.
	published   Member
	publishedAt time.Time
	lastRootAt  time.Time

	mu       sync.Mutex
	commits  map[meta.VersionID]time.Time // committed, not yet in a root
	pending  int
	lastErr  string
	retries  int64
	lagLast  time.Duration
	lagMax   time.Duration
	lagSum   time.Duration
	lagCount int64
}

// NewUploader prepares an uploader for store, whose directory dir keeps its
// state (StateFile). It tells the store to report commits to it; Start
// starts the background work, Push does one pass in the foreground.
func NewUploader(store *chain.Store, dir string, b bucket.Bucket, o Options) (*Uploader, error) {
	o.defaults()
	run := b
	if o.Writer != "" {
		if err := CheckWriterName(o.Writer); err != nil {
			return nil, err
		}
		b = bucket.Sub(run, writerDir(o.Writer))
	}
	st, err := openState(dir, b.String())
	if err != nil {
		return nil, err
	}
	u := &Uploader{store: store, bucket: b, run: run, st: st, o: o, wake: make(chan struct{}, 1),
		drain: make(chan struct{}), done: make(chan struct{}), commits: map[meta.VersionID]time.Time{}}
	store.OnCommitted(u.noteCommit)
	return u, nil
}

func (u *Uploader) noteCommit(id meta.VersionID, size int64) {
	u.mu.Lock()
	u.commits[id] = time.Now()
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// Start runs the uploader in the background until Close.
func (u *Uploader) Start() {
	u.join()
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel = cancel
	go u.loop(ctx)
}

// join tells readers, before the mount serves anything, that this writer
// is back: its newest root holds what it held at its last watermark, and
// no more (a reader's cut waits for it from now on). A new writer with an
// empty store holds everything before now; one with unknown uploads, all.
func (u *Uploader) join() {
	if u.o.Writer == "" {
		return
	}
	m := Member{Format: formatVersion, Writer: u.o.Writer, RootSeq: uint64(u.st.getInt("root_seq")),
		Watermark: u.st.getInt("watermark"), Updated: time.Now().UnixNano()}
	if m.RootSeq == 0 {
		if empty, err := u.store.Empty(); err == nil && empty {
			m.Watermark = m.Updated
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := u.putMember(ctx, &m); err != nil {
		logrus.WithError(err).Warnf("remote %s: could not announce writer %s; readers may show other writers' files that depend on its first saves until its first upload", u.run, u.o.Writer)
	}
}

// Push uploads everything the store holds now and writes its root, in the
// foreground (ckptfs push).
func (u *Uploader) Push(ctx context.Context) error {
	if _, err := u.pass(ctx); err != nil {
		return err
	}
	u.publishClosed() // an unmounted store holds no cut back
	return nil
}

// Close lets the background uploader finish what is committed for at most
// drain, then stops it (what is left resumes at the next start), and closes
// its state.
func (u *Uploader) Close(drain time.Duration) error {
	if u.cancel != nil {
		close(u.drain)
		select {
		case <-u.done:
		case <-time.After(drain):
			u.mu.Lock()
			waiting := max(u.pending, len(u.commits))
			u.mu.Unlock()
			if waiting > 0 {
				logrus.Warnf("remote %s: %d versions not uploaded yet; they will be at the next mount or ckptfs push", u.bucket, waiting)
			}
			u.cancel()
			<-u.done
		}
		u.publishClosed()
	}
	return u.st.close()
}

// publishClosed tells readers, at unmount, that this writer holds no cut
// back: everything it closed is in its newest root. Not when something
// is left to upload: then its last member object stands.
func (u *Uploader) publishClosed() {
	u.mu.Lock()
	waiting := max(u.pending, len(u.commits))
	u.mu.Unlock()
	if u.o.Writer == "" || waiting > 0 || u.published.RootSeq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := u.published
	m.Closed, m.Updated = true, time.Now().UnixNano()
	if err := u.putMember(ctx, &m); err != nil {
		logrus.WithError(err).Warnf("remote %s: could not say this writer closed; readers wait for it until it mounts again", u.run)
	}
}

// putMember writes members/<writer>.json once.
func (u *Uploader) putMember(ctx context.Context, m *Member) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return u.run.Put(ctx, memberKey(u.o.Writer), bytes.NewReader(b), int64(len(b)), sha(b))
}

// cut is the watermark of a snapshot taken now: the earliest of now and
// the first close whose commit has not landed (every file closed before
// it is committed, so the snapshot holds it), and the files being written.
func (u *Uploader) cut() (int64, []meta.Ino) {
	wm := time.Now().UnixNano()
	if u.o.Cut == nil {
		return wm, nil
	}
	oldest, writing := u.o.Cut()
	if oldest > 0 && oldest < wm {
		wm = oldest
	}
	sort.Slice(writing, func(i, j int) bool { return writing[i] < writing[j] })
	return wm, writing
}

// publish writes members/<writer>.json: root seq holds everything closed
// before watermark. After a root at once; otherwise at the heartbeat.
func (u *Uploader) publish(ctx context.Context, seq uint64, watermark int64, newRoot bool) error {
	if u.o.Writer == "" || seq == 0 {
		return nil
	}
	now := time.Now()
	if newRoot {
		u.lastRootAt = now
	}
	every := u.o.Heartbeat
	if now.Sub(u.lastRootAt) > idleAfter {
		every = idleHeartbeat
	}
	if !newRoot && u.published.RootSeq == seq && (watermark <= u.published.Watermark || now.Sub(u.publishedAt) < every) {
		return nil
	}
	m := Member{Format: formatVersion, Writer: u.o.Writer, RootSeq: seq, Watermark: watermark, Updated: now.UnixNano()}
	if err := u.retry(ctx, "put "+memberKey(u.o.Writer), func() error { return u.putMember(ctx, &m) }); err != nil {
		return fmt.Errorf("publish writer %s: %w", u.o.Writer, err)
	}
	u.published, u.publishedAt = m, now
	if err := u.st.setInt("watermark", watermark); err != nil {
		return fmt.Errorf("record the watermark: %w", err)
	}
	return nil
}

func (u *Uploader) loop(ctx context.Context) {
	defer close(u.done)
	every := u.o.Interval
	if u.o.Writer != "" {
		every = min(every, u.o.Heartbeat) // readers' cuts follow the watermark
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	draining := false
	delay := time.Second
	for {
		_, err := u.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			logrus.WithError(err).Errorf("remote %s: upload pass failed; retrying in %v", u.bucket, delay)
			u.setErr(err)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			case <-u.drain:
				draining = true
			}
			delay = min(2*delay, time.Minute)
			continue
		}
		delay = time.Second
		if draining {
			return
		}
		select {
		case <-u.wake:
			// Let the other files of the same save commit first.
			time.Sleep(100 * time.Millisecond)
		case <-tick.C:
		case <-u.drain:
			draining = true
		case <-ctx.Done():
			return
		}
	}
}

// snapshot is one moment of the store: what a root names.
type snapshot struct {
	root     Root
	versions []meta.VersionID // every version, ascending
	todo     []meta.Version   // versions not in the bucket yet
}

// collect takes a snapshot and pins the versions it must upload.
func (u *Uploader) collect(done map[meta.VersionID]uploadedRec) (*snapshot, func(), error) {
	st, release, err := u.store.HoldSnapshot(func(v *meta.Version) bool {
		_, ok := done[v.ID]
		return !ok
	})
	var snap *snapshot
	if err == nil {
		snap = &snapshot{root: Root{Format: formatVersion, Inodes: st.Inodes, Dirents: st.Dirents, Xattrs: st.Xattrs}}
		for _, v := range st.Versions {
			snap.versions = append(snap.versions, v.ID)
			if _, ok := done[v.ID]; !ok {
				snap.todo = append(snap.todo, v)
			}
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot of the store: %w", err)
	}
	sort.Slice(snap.versions, func(i, j int) bool { return snap.versions[i] < snap.versions[j] })
	return snap, release, nil
}

// pass uploads what the store holds now and, if anything changed since
// the last root, writes a new root and collects garbage. It reports
// whether it wrote a root.
func (u *Uploader) pass(ctx context.Context) (bool, error) {
	watermark, writing := u.cut() // before the snapshot: see cut
	done, err := u.st.uploaded()
	if err != nil {
		return false, err
	}
	snap, hold, err := u.collect(done)
	if err != nil {
		return false, err
	}
	var once sync.Once
	release := func() { once.Do(hold) }
	defer release()
	u.mu.Lock()
	u.pending = len(snap.todo)
	u.mu.Unlock()
	for i := range snap.todo {
		v := &snap.todo[i]
		rec, sent, err := u.uploadVersion(ctx, v)
		if err != nil {
			return false, fmt.Errorf("upload version %d: %w", v.ID, err)
		}
		if err := u.st.addUploaded(v.ID, rec, sent); err != nil {
			return false, fmt.Errorf("record upload of version %d: %w", v.ID, err)
		}
		done[v.ID] = rec
		u.mu.Lock()
		u.pending--
		u.mu.Unlock()
	}
	release()
	for _, id := range snap.versions {
		snap.root.Versions = append(snap.root.Versions, RootVersion{ID: id, Manifest: done[id].Manifest})
	}
	snap.root.Watermark, snap.root.Open = watermark, writing
	tree, _ := json.Marshal(struct {
		V []RootVersion
		I []meta.Inode
		D []Dirent
		X []Xattr
		O []meta.Ino `json:",omitempty"`
	}{snap.root.Versions, snap.root.Inodes, snap.root.Dirents, snap.root.Xattrs, snap.root.Open})
	treeHash := sha(tree)
	if string(u.st.get("tree")) == treeHash {
		// The newest root is this snapshot: it is complete to now.
		if err := u.publish(ctx, uint64(u.st.getInt("root_seq")), watermark, false); err != nil {
			return false, err
		}
		// Roots kept a while past the newest (KeepFor) go when due.
		if err := u.collectGarbage(ctx, done); err != nil {
			return false, fmt.Errorf("remote garbage collection: %w", err)
		}
		return false, nil
	}
	seq, err := u.nextSeq(ctx)
	if err != nil {
		return false, err
	}
	snap.root.Seq, snap.root.Created = seq, time.Now().UnixNano()
	b, err := json.Marshal(&snap.root)
	if err != nil {
		return false, err
	}
	if err := u.put(ctx, rootKey(seq), b); err != nil {
		return false, fmt.Errorf("write root %d: %w", seq, err)
	}
	if err := u.st.addRoot(seq, snap.versions, treeHash, int64(len(b))); err != nil {
		return false, fmt.Errorf("record root %d: %w", seq, err)
	}
	u.noteVisible(snap.versions)
	if err := u.publish(ctx, seq, watermark, true); err != nil {
		return true, err
	}
	logrus.Infof("remote %s: root %d: %d versions, %d inodes", u.bucket, seq, len(snap.versions), len(snap.root.Inodes))
	if err := u.collectGarbage(ctx, done); err != nil {
		return true, fmt.Errorf("remote garbage collection: %w", err)
	}
	return true, nil
}

// nextSeq numbers the next root: past the last this state recorded and
// past any root already in the bucket (another store's, or a state lost).
func (u *Uploader) nextSeq(ctx context.Context) (uint64, error) {
	seq := uint64(u.st.getInt("root_seq"))
	if !u.listedRoots {
		var keys []string
		err := u.retry(ctx, "list "+rootsDir, func() error {
			var err error
			keys, err = u.bucket.List(ctx, rootsDir)
			return err
		})
		if err != nil {
			return 0, err
		}
		for _, k := range keys {
			if n, ok := rootSeq(k); ok {
				seq = max(seq, n)
			}
		}
		u.listedRoots = true
	}
	return seq + 1, nil
}

// noteVisible measures the upload lag of the versions a root just made
// visible: from their commit to the root.
func (u *Uploader) noteVisible(ids []meta.VersionID) {
	now := time.Now()
	in := make(map[meta.VersionID]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var sum time.Duration
	var n int64
	for id, t := range u.commits {
		if !in[id] {
			if now.Sub(t) > time.Hour { // freed before it was uploaded
				delete(u.commits, id)
			}
			continue
		}
		lag := now.Sub(t)
		u.lagLast = lag
		u.lagMax = max(u.lagMax, lag)
		u.lagSum += lag
		u.lagCount++
		sum += lag
		n++
		delete(u.commits, id)
	}
	if n > 0 {
		_ = u.st.addInts(map[string]int64{"lag_sum_ns": int64(sum), "lag_count": n})
	}
}

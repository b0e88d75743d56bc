package fs

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/nandsim/pagecache"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
)

// FS is one mounted ckptfs: the store and the state of its open files.
type FS struct {
	names Namespace
	store Store
	open  *openTable
	// Stats renders .ckptfs/stats.json; set by the mount command.
	Stats   func() ([]byte, error)
	started time.Time // the control directory's times

	staleMu sync.Mutex
	stale   map[chain.Ino]bool // a commit failed: cached pages may be wrong
	// viewPages: which view files' kernel pages a new open may keep.
	viewPages viewPages

	storedMu sync.Mutex
	stored   map[chain.VersionID]int64 // encoded bytes of committed versions (fillAttr)

	// SyncClose commits at close before close returns (--sync-close);
	// otherwise the commit runs in the background (writeback.go).
	SyncClose bool
	commits   commitTracker
	encoding  encodeQueue // staged files waiting to encode, and encoding
	forgets   forgetQueue // inodes the kernel forgot, to free if orphans

	// Staging is the directory of staging files (stagingfile.go), in the store
	// directory; set before mounting.
	Staging     *staging.Dir
	stagingOnce sync.Once
	stagingErr  error
	stagingTemp string // a temporary staging directory made for want of one, deleted at Shutdown
	passthrough atomic.Bool
	// NoReadCopies serves every reader through the page cache; ReadCopyMin
	// is the smallest file a reader gets a read copy of (0: the default):
	// readcopy.go. Set before mounting.
	NoReadCopies bool
	ReadCopyMin  int64
	readCopies   readCopyStats
	releases     *releaseOrder // set by Mount
	backingMu    sync.Mutex
	backings     map[chain.Ino]*backing
	linger       time.Duration // backingLinger; tests shorten it
	heldMu       sync.Mutex
	live         map[*stagedFile]bool // files staged (stagedFiles)
	held         []*contentHold       // content held for them (holdForStaged)

	// The write-back model of the host's page cache (wear.go): staged
	// bytes waiting for their commit, and the dirty expiry and background
	// limit past which the host would have written them to the device.
	stagedBytes atomic.Int64
	dirtyExpire time.Duration
	dirtyLimit  int64
	staged      stagingCache // staging files in the page cache (wear.go)

	atimeMode atomic.Int32 // an AtimeMode (SetAtimeMode)
	atimes    sync.Map     // chain.Ino -> int64: reads' access times not yet written (lazyatime.go)

	quit     chan struct{} // closed by Shutdown
	quitOnce sync.Once
	roomMu   sync.RWMutex // held by the tries of saves waiting for room (hostspace.go)
	// waitingForRoom counts the saves waiting for room on the host;
	// retrying those kept after another failure, commitsFailed the
	// failures (hostspace.go).
	waitingForRoom atomic.Int64
	retrying       atomic.Int64
	commitsFailed  atomic.Int64

	recent   recentCommits // commits landed in the last moments (settle.go)
	draining atomic.Int32  // Drains under way: no commit settles meanwhile

	// copySlots bounds the committed contents rebuilt into staging files
	// at once (copyCommitted): each holds a buffer and a reader's
	// rebuilds, and they share the same cores.
	copySlots chan struct{}
}

// copySlotsFor is how many copies run at once on procs cores: past the
// cores they only add memory.
func copySlotsFor(procs int) int { return min(max(procs, 2), 8) }

// markStale notes that the kernel's cached pages of ino may hold bytes
// that were never committed.
func (f *FS) markStale(ino chain.Ino) {
	f.staleMu.Lock()
	f.stale[ino] = true
	f.staleMu.Unlock()
	f.viewPages.changed(ino)
}

// takeStale reports, once, whether ino's cached pages must be dropped.
func (f *FS) takeStale(ino chain.Ino) bool {
	f.staleMu.Lock()
	defer f.staleMu.Unlock()
	s := f.stale[ino]
	delete(f.stale, ino)
	return s
}

// New returns the filesystem for a store (its namespace, and the rest of
// it); Root is its root node.
func New(names Namespace, store Store) *FS {
	f := &FS{names: names, store: store, open: newOpenTable(), started: time.Now(), stale: map[chain.Ino]bool{},
		backings: map[chain.Ino]*backing{}, linger: backingLinger, live: map[*stagedFile]bool{}, quit: make(chan struct{}),
		copySlots: make(chan struct{}, copySlotsFor(runtime.GOMAXPROCS(0)))}
	f.dirtyExpire, f.dirtyLimit = pagecache.HostSettings()
	store.ModelShadowWriteBack(f.dirtyExpire, f.dirtyLimit)
	return f
}

// Root returns the root directory node to mount.
func (f *FS) Root() gofs.InodeEmbedder { return &Node{fsys: f, ino: chain.RootIno} }

// Node is a file, directory or symlink of the store.
type Node struct {
	gofs.Inode
	fsys *FS
	ino  chain.Ino
}

var (
	_ gofs.NodeOnForgetter = (*Node)(nil)
	_ gofs.NodeGetattrer   = (*Node)(nil)
	_ gofs.NodeSetattrer   = (*Node)(nil)
	_ gofs.NodeStatfser    = (*Node)(nil)
)

// toErrno maps store errors to what the kernel understands. Anything
// unexpected is logged with its context and reported as EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, chain.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, chain.ErrChecksum):
		logrus.WithError(err).Error("corrupt data")
		return syscall.EIO
	}
	logrus.WithError(err).Error("i/o error")
	return syscall.EIO
}

// OnForget runs when the kernel drops its last reference to the node.
func (n *Node) OnForget() {
	if n.fsys.open.forget(n.ino) {
		n.fsys.forget(n.ino)
	}
}

// forget frees ino if it has no names left (an orphan); otherwise nothing.
// Orphans are freed in batches (forgetQueue), off the request's path.
func (f *FS) forget(ino chain.Ino) { f.forgets.add(f, ino) }

// path is the node's path below the root, which names its family; the
// store's name for it where go-fuse's tree has none to the root (a file
// opened by handle, export.go).
func (n *Node) path() string {
	if p, ok := n.treePath(); ok {
		return p
	}
	return n.fsys.storePath(n.ino)
}

func (n *Node) child(ctx context.Context, in *chain.Inode, out *fuse.EntryOut) *gofs.Inode {
	if n.fsys.fillAttr(in, &out.Attr) {
		out.SetAttrTimeout(stagedAttrTimeout)
	}
	n.fsys.open.remember(in.Ino)
	node := &Node{fsys: n.fsys, ino: in.Ino}
	return n.NewInode(ctx, node, stableAttr(in))
}

// stagedAttrTimeout is how long the kernel may keep a staged file's
// attributes: one jiffy. Zero would not do: go-fuse replaces a zero
// timeout with the mount's (a second), and stat would miss a truncate's
// times, or a commit's blocks, for that long.
const stagedAttrTimeout = time.Nanosecond

// stagedOf is ino's staging file, or nil while its content is the
// committed one.
func (f *FS) stagedOf(ino chain.Ino) *stagedFile {
	if of := f.open.get(ino); of != nil {
		return of.staged.Load()
	}
	return nil
}

// stagedView is in as stat shows it while sf (nil: none) holds its
// content: the staging file's size and mtime, and a ctime no older than
// that mtime, since a write or a truncate changes both (the commit records
// the same, chain's contentCtime). staged is false when sf holds nothing:
// nil, or gone with its commit, which landed after in was read: in is read
// again then.
func (f *FS) stagedView(in *chain.Inode, sf *stagedFile) (view *chain.Inode, staged bool) {
	if sf == nil {
		return in, false
	}
	size, mtime, ok := sf.attr()
	if !ok {
		if fresh, err := f.names.Inode(in.Ino); err == nil {
			return fresh, false
		}
		return in, false
	}
	v := *in
	v.Size, v.Mtime, v.Ctime = size, mtime, max(in.Ctime, mtime)
	return &v, true
}

// fillAttr converts an inode; a staged file's size and times win over the
// committed ones (stagedView). Blocks (what du and ls -s show) count the
// bytes the store keeps for the committed version, so du of a mount shows
// what the checkpoints cost on flash; while a file is staged, the logical
// size, or its staging file's allocated bytes if fallocate holds space for
// it and they are more (space.go).
//
// in was read before the staging file is looked up here, so a commit may
// have landed in between and let go of it: with no staging file, the
// inode is read again, after (fillAttrStaged's order). Without that, a
// lookup during a save's commit answered the size before the save, and
// the kernel kept it for the attribute timeout (TestLookupDuringCommit).
func (f *FS) fillAttr(in *chain.Inode, out *fuse.Attr) (staged bool) {
	sf := f.stagedOf(in.Ino)
	if sf == nil {
		if fresh, err := f.names.Inode(in.Ino); err == nil {
			in = fresh
		}
	}
	return f.fillAttrStaged(in, sf, out)
}

// fillAttrStaged is fillAttr with sf, the inode's staging file looked up
// before in was read: a commit records the inode before it lets go of its
// staging file, so the committed attributes never come from an in read
// before the commit landed.
func (f *FS) fillAttrStaged(in *chain.Inode, sf *stagedFile, out *fuse.Attr) (staged bool) {
	in, writing := f.stagedView(in, sf)
	size, fallocated := in.Size, int64(0)
	if writing {
		fallocated = f.fallocatedBytes(in.Ino, sf)
	}
	allocated := max(size, fallocated)
	if !writing && in.Version != 0 && size > smallFileMax {
		if stored, ok := f.storedBytes(in); ok {
			allocated = stored
		}
	}
	out.Ino = uint64(in.Ino)
	out.Mode = in.Mode
	out.Nlink = in.Nlink
	out.Owner = fuse.Owner{Uid: in.Uid, Gid: in.Gid}
	out.Rdev = in.Rdev
	out.Size = uint64(size)
	out.Blksize = 4096
	out.Blocks = (uint64(allocated) + 511) / 512
	at, mt, ct := time.Unix(0, f.atimeOf(in)), time.Unix(0, in.Mtime), time.Unix(0, in.Ctime)
	out.SetTimes(&at, &mt, &ct)
	return writing
}

// storedBytes is the encoded size of in's committed version. A version
// never changes, so the size is read once (Store.Info, a metadata read
// transaction) and kept by version ID; getattr of a file seen before costs
// a map lookup. The map is dropped when it grows past storedCacheMax.
func (f *FS) storedBytes(in *chain.Inode) (int64, bool) {
	f.storedMu.Lock()
	n, ok := f.stored[in.Version]
	f.storedMu.Unlock()
	if ok {
		return n, true
	}
	info, err := f.store.Info(in.Ino)
	if err != nil || info == nil || info.Version != in.Version {
		return 0, false // gone or replaced meanwhile: the caller uses the size
	}
	f.storedMu.Lock()
	if f.stored == nil || len(f.stored) >= storedCacheMax {
		f.stored = map[chain.VersionID]int64{}
	}
	f.stored[in.Version] = info.StoredBytes
	f.storedMu.Unlock()
	return info.StoredBytes, true
}

const storedCacheMax = 1 << 16

// Getattr reports the inode's attributes. The attributes of a staged file
// are not cached by the kernel: its blocks change when it is committed.
func (n *Node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	sf := n.fsys.stagedOf(n.ino) // before the inode: fillAttrStaged
	in, err := n.fsys.names.Inode(n.ino)
	if err != nil {
		return toErrno(err)
	}
	if n.fsys.fillAttrStaged(in, sf, &out.Attr) {
		out.SetTimeout(stagedAttrTimeout)
	}
	return 0
}

// AtimeMode says when reads update a file's access time, as the mount
// options relatime, noatime and strictatime do.
type AtimeMode int32

const (
	// Relatime, the default: when the atime is older than the mtime or
	// the ctime, or than a day.
	Relatime AtimeMode = iota
	// Noatime: never.
	Noatime
	// Strictatime: at every read.
	Strictatime
)

// SetAtimeMode sets when reads update access times (Relatime unless set;
// a read-only mount wants Noatime).
func (f *FS) SetAtimeMode(m AtimeMode) { f.atimeMode.Store(int32(m)) }

// atimeDue is Linux's rule (atime_needs_update, relatime_need_update):
// whether a read at now updates an atime of at, in mode, for a file whose
// stat shows the mtime mt and the ctime ct.
func atimeDue(mode AtimeMode, at, mt, ct, now int64) bool {
	switch {
	case mode == Noatime || at == now:
		return false
	case mode == Strictatime:
		return true
	}
	return mt >= at || ct >= at || now-at >= int64(24*time.Hour)
}

// atimeStale reports whether a read at now would update the atime of the
// regular file, by the mount's rule (atimeDue) and the times stat shows.
// It costs a metadata read.
func (n *Node) atimeStale(now int64) bool {
	f := n.fsys
	mode := AtimeMode(f.atimeMode.Load())
	if mode == Noatime || n.StableAttr().Mode != syscall.S_IFREG {
		return false
	}
	sf := f.stagedOf(n.ino) // before the inode: fillAttrStaged
	in, err := f.names.Inode(n.ino)
	if err != nil {
		return false
	}
	v, _ := f.stagedView(in, sf)
	return atimeDue(mode, f.atimeOf(v), v.Mtime, v.Ctime, now)
}

// accessed records a read the daemon serves (Read) in the atime where the
// mount's rule says so: the kernel updates no atime of a FUSE file. Under
// relatime that is a metadata transaction per file and change or day.
// A failure costs only the update (a read-only store).
func (n *Node) accessed() {
	now := time.Now().UnixNano()
	if !n.atimeStale(now) {
		return
	}
	n.fsys.atimes.Store(n.ino, now) // written at unmount (lazyatime.go)
	n.NotifyContent(-1, 0)          // the kernel's attributes hold the old atime; its pages stay
}

// readerOpened prepares a reader's open (chooseMode) for its atime: the
// kernel serves reads from its page cache without telling the daemon, so
// where a read would update the atime the open drops the file's pages
// (markStale: the open does not keep the cache) and the first read that
// reaches the daemon checks. The open itself is no access: a file opened
// and never read keeps its atime, as on any filesystem. A passthrough
// reader (of a file being written through passthrough), and a read of an
// empty file (the kernel asks nothing), leave the atime.
func (n *Node) readerOpened(of *openFile) {
	if n.atimeStale(time.Now().UnixNano()) {
		of.atimeChecked.Store(0)
		n.fsys.markStale(n.ino)
	}
}

// Setattr changes size, mode, owner and times.
func (n *Node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	// A commit landing after this would undo its times (cp -p sets them
	// after close).
	n.waitCommitOf()
	now := time.Now().UnixNano()
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(int64(size), now); errno != 0 {
			return errno
		}
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && n.StableAttr().Mode == syscall.S_IFREG {
		if errno := n.killPrivileges(ctx); errno != 0 { // truncate or chown by a non-root caller
			return errno
		}
	}
	mode, hasMode := in.GetMode()
	uid, hasUid := in.GetUID()
	gid, hasGid := in.GetGID()
	atime, hasAtime := in.GetATime()
	mtime, hasMtime := in.GetMTime()
	if hasMtime || hasAtime {
		// A staged file's times are its staging file's, which its commit
		// records: utimens must not be undone by it.
		if of := n.fsys.open.get(n.ino); of != nil {
			of.mu.Lock()
			if sf := of.stage; sf != nil {
				at, mt := atime, mtime
				if !hasAtime {
					at = time.Now()
				}
				if !hasMtime {
					_, m, _ := sf.attr()
					mt = time.Unix(0, m)
				}
				_ = sf.use(func(*os.File) error { return os.Chtimes(sf.Path(), at, mt) })
			}
			of.mu.Unlock()
		}
	}
	if hasMode || hasUid || hasGid || hasAtime || hasMtime {
		caller, _ := fuse.FromContext(ctx)
		_, err := n.fsys.names.SetAttr(n.ino, func(ino *chain.Inode) error {
			if (hasUid || hasGid) && !hasMode {
				ino.Mode = setidCleared(ino.Mode, caller, ino.Gid)
			}
			if hasMode {
				ino.Mode = ino.Mode&syscall.S_IFMT | mode&^syscall.S_IFMT
			}
			if hasUid {
				ino.Uid = uid
			}
			if hasGid {
				ino.Gid = gid
			}
			if hasAtime {
				ino.Atime = atime.UnixNano()
				n.fsys.atimes.Delete(n.ino) // utimens wins over a read's
			}
			if hasMtime {
				ino.Mtime = mtime.UnixNano()
			}
			return nil
		})
		if err != nil {
			return toErrno(err)
		}
	}
	return n.Getattr(ctx, fh, out)
}

// setidCleared is a file's mode after a change that kills privileges, by
// Linux's one rule (setattr_should_drop_suidgid, chown_common): any file
// but a directory loses setuid; setgid goes where the group may execute,
// or, on a file it only marks for mandatory locking, when the caller is
// neither root nor in the file's group gid. A chown applies it for root
// too; a write, truncate or fallocate only for callers other than root
// (killPrivileges). The kernel leaves all of it to a FUSE daemon that
// handles kill-priv (pjdfstest chown/00.t, fstests generic/193).
func setidCleared(mode uint32, caller *fuse.Caller, gid uint32) uint32 {
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		return mode
	}
	mode &^= syscall.S_ISUID
	if mode&syscall.S_ISGID != 0 && (mode&syscall.S_IXGRP != 0 || caller != nil && caller.Uid != 0 && !inGroup(caller, gid)) {
		mode &^= syscall.S_ISGID
	}
	return mode
}

// truncate sets the file size: of the staging file if the file is being
// written (it commits with the writes), else as a change committed at once,
// as truncate(2) is on any filesystem.
func (n *Node) truncate(size, now int64) syscall.Errno {
	if n.StableAttr().Mode != syscall.S_IFREG {
		return syscall.EINVAL
	}
	if size < 0 || size > maxFileSize {
		return syscall.EFBIG
	}
	if of := n.fsys.open.get(n.ino); of != nil {
		of.mu.Lock()
		defer of.mu.Unlock()
		of.waitCommit()
		if errno := n.secureClosed(of); errno != 0 {
			return errno
		}
		if sf := of.stage; sf != nil {
			of.save.Change()
			sf.committed = false
			sf.noteReopened()
			if err := sf.markWriting(false); err != nil {
				return toErrno(err)
			}
			return toErrno(sf.use(func(f *os.File) error { return f.Truncate(size) }))
		}
		of.reader = nil // the committed version is about to change
	}
	// Not being written: as a writer that opened, cut and closed the file
	// would, stage the committed content, cut it, and commit it now.
	sf, errno := n.newStage(size == 0)
	if errno != 0 {
		return errno
	}
	defer n.fsys.retire(n.ino, sf)
	err := sf.use(func(f *os.File) error {
		if err := f.Truncate(size); err != nil {
			return err
		}
		return n.fsys.store.CommitFile(n.ino, n.path(), f, now)
	})
	if err != nil {
		return toErrno(err)
	}
	sf.committed = true
	n.fsys.truncateBacking(n.ino, size)
	return 0
}

// Statfs reports the device's logical capacity and free space, less what
// fallocate holds for files being written: the free space fallocate is
// checked against (space.go). Staging files, on the host, do not count.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st := n.fsys.store.Statfs()
	out.Bsize = uint32(st.PageSize)
	out.Frsize = uint32(st.PageSize)
	out.Blocks = uint64(st.Pages)
	out.Bfree = uint64(st.FreePages)
	out.Bavail = uint64(st.FreePages)
	out.Files = st.Inodes + 1<<20
	out.Ffree = 1 << 20
	out.NameLen = chain.MaxNameLen
	return 0
}

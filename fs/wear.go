package fs

import (
	"os"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/nandsim/pagecache"
	"golang.org/x/sys/unix"
)

// What staging costs the SSD. A staging file lives in the host's page
// cache, and the host writes its pages to the device by the page cache's
// rules (nandsim/pagecache, the model the device and the shadow use too):
// when asked (fsync, sync), when they have been dirty longer than the
// dirty expiry (30 s by default, counted from the content's start), or
// when the dirty bytes pass the background limit (oldest files first). A
// file encoded and deleted before any of these costs the device nothing,
// as a short-lived file costs a plain filesystem nothing. docs/NANDSIM.md.

// maxFileSize is the largest file the store keeps.
const maxFileSize = chain.MaxFileSize

// stagingCache is the staging files' dirty pages, from the close of a
// save (its content known) to the end of its commit.
type stagingCache struct {
	once  sync.Once
	mu    sync.Mutex
	cache *pagecache.Cache[*stagedFile]
}

// stagingPages is the model, made with the filesystem's write-back settings
// at its first use.
func (f *FS) stagingPages() *stagingCache {
	f.staged.once.Do(func() {
		f.staged.cache = pagecache.New[*stagedFile](f.dirtyExpire, f.dirtyLimit/pageSize, time.Now)
	})
	return &f.staged
}

// pageSize is the host page the model counts in.
const pageSize = 4096

// stagedSize is how many bytes sf's content takes on the host: the pages
// written, not the holes.
func stagedSize(sf *stagedFile) int64 {
	var size int64
	_ = sf.use(func(file *os.File) error {
		var st unix.Stat_t
		if err := unix.Fstat(int(file.Fd()), &st); err != nil {
			return err
		}
		size = st.Blocks * 512
		return nil
	})
	return size
}

// stagedClosed tells the model that sf holds a closed save, dirty since
// its content started; past the background limit the host writes back the
// oldest staging files.
func (f *FS) stagedClosed(sf *stagedFile) {
	sc := f.stagingPages()
	sc.mu.Lock()
	over := sc.cache.DirtySince(sf, pagecache.Run{Len: (stagedSize(sf) + pageSize - 1) / pageSize}, sf.born)
	if over {
		// Copies no handle uses go first (readcopy.go): deleted, they are
		// never written.
		sc.mu.Unlock()
		f.dropCopies()
		sc.mu.Lock()
		over = sc.cache.Over()
	}
	var written []*stagedFile
	for over {
		oldest, _, ok := sc.cache.TakeOldest()
		if !ok {
			break
		}
		written = append(written, oldest)
		over = sc.cache.Over()
	}
	sc.mu.Unlock()
	for _, w := range written {
		f.chargeStaged(w)
	}
}

// chargeStagedIfDue charges sf if its pages are past the expiry: the host
// wrote them back before its commit ended.
func (f *FS) chargeStagedIfDue(sf *stagedFile) {
	sc := f.stagingPages()
	sc.mu.Lock()
	due := sc.cache.Due(sf)
	sc.mu.Unlock()
	if due {
		f.chargeStaged(sf)
	}
}

// stagedDone drops sf from the model: committed, its content no longer
// counted as a save waiting.
func (f *FS) stagedDone(sf *stagedFile) {
	sc := f.stagingPages()
	sc.mu.Lock()
	sc.cache.Forget(sf)
	sc.mu.Unlock()
}

// chargeStaged charges the device for sf's content, written back by the
// host (fsync, expiry, limit): once per content. Another file's close may
// charge sf (the limit), so charged is under the model's lock.
func (f *FS) chargeStaged(sf *stagedFile) {
	sc := f.stagingPages()
	sc.mu.Lock()
	sc.cache.Take(sf)
	already := sf.charged
	sf.charged = true
	sc.mu.Unlock()
	if !already {
		f.store.ChargeStaged(stagedSize(sf))
	}
}

// stagedRestart starts a new content in sf, a staging file taken up again
// by a writer: not in the model, not charged.
func (f *FS) stagedRestart(sf *stagedFile) {
	sc := f.stagingPages()
	sc.mu.Lock()
	sc.cache.Forget(sf)
	sf.charged = false
	sc.mu.Unlock()
}

// truncateBacking keeps a lingering backing file (stagingfile.go) equal to the
// committed content after a truncate(2) of the committed file.
func (f *FS) truncateBacking(ino chain.Ino, size int64) {
	f.backingMu.Lock()
	b := f.backings[ino]
	f.backingMu.Unlock()
	if b != nil {
		_ = b.sf.use(func(file *os.File) error { return file.Truncate(size) })
	}
}

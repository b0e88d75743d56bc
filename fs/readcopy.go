package fs

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Reads through passthrough. A reader that opens a committed file of at
// least ReadCopyMin bytes, while no handle of it is served through the
// kernel's page cache, gets a read copy: the content rebuilt at the open
// into a staging file, from which the kernel serves the handle as it serves
// a writer's (FUSE passthrough). Reads, mmap faults and read-ahead are then
// the host filesystem's: a second reader (eight ranks loading one shard, an
// evaluation reading the checkpoint again) reads the copy's pages from the
// host's page cache with no decode and no request to the daemon, and a
// FUSE page cache, about 2x slower to copy from than the host's for 1 MiB
// reads, is never involved. The rebuild is the one a first read pays
// anyway, made at the open on every worker; a program that opens a large
// file to read a few bytes of it pays the whole rebuild (below
// ReadCopyMin, files are served through the page cache as before).
//
// A copy's pages are dirty in the host's page cache. The write-back model
// of the staging files (wear.go) counts them from the copy's start, and the
// device is charged for them if the host would write them back: held open
// past the dirty expiry, or pushed out by the background limit. So a copy
// is made only while the model's dirty pages stay under half of that limit
// and the host has room for it, and a copy no handle uses is deleted
// before its expiry (readCopyLife). The reads never reach the daemon: the
// copy's own access time, set back at an open that a read would count for
// and moved by the host's kernel at a read, tells it at the close whether
// to move the file's (Node.accessed). A reader opening the file meanwhile
// is served from it; a writer takes it over as its staging file, as it
// would a save's staging file kept as a backing (stagingfile.go). A crash
// leaves it marked done: the next open of the store deletes it.

// DefaultReadCopyMin is the smallest file a reader gets a read copy of.
const DefaultReadCopyMin = 1 << 20

// readCopyMin is the smallest file a reader gets a read copy of.
func (f *FS) readCopyMin() int64 {
	if f.ReadCopyMin > 0 {
		return f.ReadCopyMin
	}
	return DefaultReadCopyMin
}

// readCopyRoom is what the host keeps free beside a read copy: the saves'
// staging files need it more.
const readCopyRoom = 512 << 20

// readCopyLife is the part of the dirty expiry a read copy no handle uses
// is kept for, from its start: deleted before the host would write it.
func (f *FS) readCopyLife() time.Duration { return f.dirtyExpire * 5 / 6 }

// readCopyStats counts the read copies made, and the readers served from
// a copy of the committed content (a read copy, or a save's staging file
// kept after its commit).
type readCopyStats struct {
	copies, bytes, readers atomic.Int64
}

// ReadCopies is the number of read copies made, and their bytes.
func (f *FS) ReadCopies() (copies, bytes int64) {
	return f.readCopies.copies.Load(), f.readCopies.bytes.Load()
}

// prepareReadCopy makes a read copy of n's committed content for a reader
// about to open it, where one is due (above); chooseMode then serves the
// reader from it. A failure leaves the reader served through the page
// cache. Call with of.mu held, for a reader without O_DIRECT.
func (n *Node) prepareReadCopy(of *openFile) {
	f := n.fsys
	if f.NoReadCopies || !f.PassthroughOn() || of.cached > 0 || of.passthrough > 0 || of.stage != nil {
		return
	}
	f.backingMu.Lock()
	b := f.backings[n.ino]
	f.backingMu.Unlock()
	if b != nil && !b.sf.gone {
		return // the inode's backing file: chooseMode decides
	}
	in, err := f.names.Inode(n.ino)
	if err != nil || in.Version == 0 || in.Size < f.readCopyMin() || !f.roomForReadCopy(in.Size) {
		return
	}
	start := time.Now()
	sf, errno := n.newReadCopy()
	if errno != 0 {
		logrus.Debugf("read copy of %s: %v: served through the page cache", n.path(), errno)
		return
	}
	sf.committed, sf.born = true, start
	f.stagedClosed(sf) // its pages are dirty from its start
	f.backingMu.Lock()
	if cur := f.backings[n.ino]; cur != nil && !cur.sf.gone {
		f.backingMu.Unlock()
		f.stagedDone(sf)
		sf.remove()
		return
	}
	b = &backing{sf: sf, at: time.Now(), until: start.Add(f.readCopyLife())}
	f.backings[n.ino] = b
	drop := f.dropAt(b)
	f.backingMu.Unlock()
	f.readCopies.copies.Add(1)
	f.readCopies.bytes.Add(in.Size)
	logrus.Debugf("read copy of %s: %d bytes in %v", n.path(), in.Size, time.Since(start).Round(time.Millisecond))
	// Unused (the open failed after this), it goes as any other; held
	// past the expiry, the host wrote it back.
	time.AfterFunc(time.Until(drop), func() { f.dropBacking(n.ino, b) })
	time.AfterFunc(time.Until(start.Add(f.dirtyExpire)), func() { f.chargeStagedIfDue(sf) })
}

// atime is the copy's access time on the host (Unix ns; 0 if unknown):
// reads through passthrough move it by the host's rules (relatime), which
// is how the daemon learns that a reader it never hears from read.
func (sf *stagedFile) atime() int64 {
	var at int64
	_ = sf.use(func(f *os.File) error {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return err
		}
		at = st.Atim.Nano()
		return nil
	})
	return at
}

// ageAtime sets the copy's access time back to the epoch, so that the
// host moves it at the next read whatever its atime rule, short of
// noatime (the file's own rule, strictatime or relatime, decides then).
func (sf *stagedFile) ageAtime() {
	_ = sf.use(func(*os.File) error { return os.Chtimes(sf.Path(), time.Unix(0, 1), time.Time{}) })
}

// newReadCopy is a staging file holding n's committed content, marked
// done: a copy, never a save to ingest.
func (n *Node) newReadCopy() (*stagedFile, syscall.Errno) {
	dir, err := n.fsys.stagingDir()
	if err != nil {
		return nil, toErrno(err)
	}
	file, err := dir.Create(uint64(n.ino))
	if err != nil {
		return nil, toErrno(err)
	}
	sf := &stagedFile{File: file, path: n.path}
	if errno := n.copyCommitted(sf); errno != 0 {
		sf.remove()
		return nil, errno
	}
	if err := sf.Mark(staging.Done); err != nil {
		sf.remove()
		return nil, toErrno(err)
	}
	return sf, 0
}

// roomForReadCopy reports whether a read copy of size bytes keeps the
// model's dirty pages under half the background limit and leaves the host
// room.
func (f *FS) roomForReadCopy(size int64) bool {
	pages := (size + pageSize - 1) / pageSize
	sc := f.stagingPages()
	sc.mu.Lock()
	dirty := sc.cache.Pages()
	sc.mu.Unlock()
	if dirty+pages > f.dirtyLimit/pageSize/2 {
		return false
	}
	free, ok := f.hostFree()
	return ok && free-size >= readCopyRoom
}

// dropAt is when b, a backing no handle uses since b.at, is dropped: a
// moment after (FS.linger), or for a read copy as late as its life allows.
// Call with backingMu held.
func (f *FS) dropAt(b *backing) time.Time {
	at := b.at.Add(f.linger)
	if b.until.After(at) {
		return b.until
	}
	return at
}

// dropUnusedCopies deletes the copies of committed files that no handle
// uses (read copies, and saves' staging files kept after their commits),
// for .ckptfs/drop_caches. One released less than FS.linger ago may still
// be the kernel's backing file: it is waited for.
func (f *FS) dropUnusedCopies() {
	for f.dropCopies() {
		time.Sleep(f.linger / 10)
	}
}

// dropCopies deletes the copies no handle uses that the kernel holds no
// more, and reports whether others are still to come (released less than
// FS.linger ago). A deleted copy's dirty pages are never written: a
// save closed past the background limit drops them first (stagedClosed).
func (f *FS) dropCopies() (more bool) {
	var drop []*stagedFile
	f.backingMu.Lock()
	for ino, b := range f.backings {
		if b.refs > 0 || b.sf.gone || b.sf.State() != staging.Done {
			continue
		}
		if time.Since(b.at) < f.linger {
			more = true
			continue
		}
		delete(f.backings, ino)
		drop = append(drop, b.sf)
	}
	f.backingMu.Unlock()
	for _, sf := range drop {
		f.dropDone(sf)
	}
	return more
}

package fs

import (
	"sync"
	"sync/atomic"

	"github.com/ckptfs/ckptfs/chain"
)

// openFile is the state one inode's open handles share: the uncommitted
// writer, and a reader of the committed version.
type openFile struct {
	mu       sync.Mutex
	handles  int
	writable int // handles open for writing (under openTable.mu)
	writer   *chain.Writer
	reader   *chain.Reader
	// size is the uncommitted content's size, -1 with none: stat and
	// listings read it without taking mu, which a commit holds while it
	// encodes (a 64 GiB file takes a while), so they never wait on it.
	size atomic.Int64
	// mtime is the uncommitted content's modification time (0: none), for
	// stat likewise: the commit records it.
	mtime atomic.Int64
	// pending is the commit running in the background since the last
	// close (writeback.go); failed, the error of one that failed, which
	// the next fsync reports.
	pending *pendingCommit
	failed  error
	// smallCommit is pending when the file is small (statWaitMax), for
	// stat, which reads it without mu and waits for it (writeback.go).
	smallCommit atomic.Pointer[pendingCommit]
}

// noteSize records the writer's size for stat; call with mu held, after
// any change of the writer or of its size.
func (of *openFile) noteSize() {
	if of.writer != nil {
		of.size.Store(of.writer.Size())
		of.mtime.Store(of.writer.Mtime())
	} else {
		of.size.Store(-1)
		of.mtime.Store(0)
	}
}

// addWritable counts a handle of of that may write.
func (t *openTable) addWritable(of *openFile) {
	t.mu.Lock()
	of.writable++
	t.mu.Unlock()
}

// writableOpen reports whether ino has a handle open for writing.
func (t *openTable) writableOpen(ino chain.Ino) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[ino]
	return of != nil && of.writable > 0
}

// openTable holds the openFile of every inode with open handles, and the
// inodes the kernel holds references to (looked up and not yet forgotten):
// an unlinked inode must live while either remains, as on any filesystem,
// or an fstat between the kernel's lookup and open would find it gone.
type openTable struct {
	mu    sync.Mutex
	files map[chain.Ino]*openFile
	known map[chain.Ino]bool
}

func newOpenTable() *openTable {
	return &openTable{files: map[chain.Ino]*openFile{}, known: map[chain.Ino]bool{}}
}

// remember notes that the kernel references ino.
func (t *openTable) remember(ino chain.Ino) {
	t.mu.Lock()
	t.known[ino] = true
	t.mu.Unlock()
}

// forget notes that the kernel dropped ino; it reports whether the inode is
// now unused (no handles either).
func (t *openTable) forget(ino chain.Ino) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.known, ino)
	return t.files[ino] == nil
}

// inUse reports whether ino is open or referenced by the kernel.
func (t *openTable) inUse(ino chain.Ino) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[ino] != nil || t.known[ino]
}

// acquire returns the inode's shared state, counting one more handle.
func (t *openTable) acquire(ino chain.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[ino]
	if of == nil {
		of = &openFile{}
		of.size.Store(-1)
		t.files[ino] = of
	}
	of.handles++
	return of
}

// release drops a handle. When it was the inode's last, commit runs (with
// of.mu held) before the shared state leaves the table, so a concurrent open
// finds either the uncommitted writer or the committed content, never a gap.
// It reports whether the inode is now unused (no handles, not referenced by
// the kernel).
func (t *openTable) release(ino chain.Ino, writable bool, commit func(*openFile)) bool {
	t.mu.Lock()
	of := t.files[ino]
	if of == nil {
		t.mu.Unlock()
		return !t.known[ino]
	}
	of.handles--
	if writable {
		of.writable--
	}
	last := of.handles == 0
	t.mu.Unlock()
	if !last {
		return false
	}
	of.mu.Lock()
	commit(of)
	of.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if of.handles > 0 { // reopened meanwhile: it keeps the state
		return false
	}
	delete(t.files, ino)
	return !t.known[ino]
}

// hold counts one more handle on of, the state of ino (a background commit
// holds one, so that the state and the inode outlive the last close).
func (t *openTable) hold(ino chain.Ino, of *openFile) {
	t.mu.Lock()
	defer t.mu.Unlock()
	of.handles++
	t.files[ino] = of
}

// get returns the inode's shared state, or nil if it has no open handles.
func (t *openTable) get(ino chain.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[ino]
}

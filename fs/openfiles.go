package fs

import (
	"sync"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/meta"
)

// openFile is the state one inode's open handles share: the uncommitted
// writer, and a reader of the committed version.
type openFile struct {
	mu      sync.Mutex
	handles int
	writer  *chain.Writer
	reader  *chain.Reader
	version meta.VersionID // the version reader reads
}

// openTable holds the openFile of every inode with open handles.
type openTable struct {
	mu    sync.Mutex
	files map[meta.Ino]*openFile
}

func newOpenTable() *openTable { return &openTable{files: map[meta.Ino]*openFile{}} }

// acquire returns the inode's shared state, counting one more handle.
func (t *openTable) acquire(ino meta.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[ino]
	if of == nil {
		of = &openFile{}
		t.files[ino] = of
	}
	of.handles++
	return of
}

// release drops a handle; it reports whether it was the inode's last.
func (t *openTable) release(ino meta.Ino) (*openFile, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	of := t.files[ino]
	if of == nil {
		return nil, true
	}
	of.handles--
	if of.handles > 0 {
		return of, false
	}
	delete(t.files, ino)
	return of, true
}

// get returns the inode's shared state, or nil if it has no open handles.
func (t *openTable) get(ino meta.Ino) *openFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[ino]
}

// isOpen reports whether the inode has open handles.
func (t *openTable) isOpen(ino meta.Ino) bool { return t.get(ino) != nil }

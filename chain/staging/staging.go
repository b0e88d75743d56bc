// Package staging keeps the files being saved into a mount: one plain file
// per file being written, in the store directory (the same filesystem as
// the store, never in the mount). The kernel's page cache holds a save as it
// does for a plain directory; the store encodes it from here after its last
// close and then deletes it.
//
// A staging file's name is its record: "<ino>-<seq>.open" while a writer
// may still change it, "<ino>-<seq>.closed" once every writer closed it
// (to be ingested), "<ino>-<seq>.done" once committed but still the backing
// file of an open passthrough handle. A closed save that a writer opened
// again to append to (O_APPEND), before it was committed, is
// "<ino>-<seq>.append-<size>": its first size bytes are the closed save. A
// rename survives the daemon's death (it is the kernel's), so the next open
// of the store ingests what was closed (of an appended file, its first size
// bytes) and drops what was still open: the file then keeps its previous
// content, whole.
package staging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// State is where a staging file is in its life.
type State string

// The states, which are the names' suffixes.
const (
	Open      State = "open"
	Closed    State = "closed"
	Done      State = "done"
	Appending State = "append" // named with the closed save's size
)

// Dir is a store's staging directory.
type Dir struct {
	path string
	seq  atomic.Uint64
}

// Name is the staging directory's name inside a store directory.
const Name = "staging"

// OpenDir opens (creating it, mode 0700) the staging directory at path.
func OpenDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("staging directory: %w", err)
	}
	d := &Dir{path: path}
	// Names stay unique across restarts: sequence numbers start past the
	// clock, which a restart never turns back by more than it ran.
	d.seq.Store(uint64(time.Now().UnixNano()))
	return d, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// File is one staging file, open for reading and writing.
type File struct {
	dir   *Dir
	Ino   uint64
	seq   uint64
	state State
	keep  int64 // Appending: the size of the closed save it starts with
	*os.File
}

func (d *Dir) name(ino, seq uint64, s State, keep int64) string {
	if s == Appending {
		return filepath.Join(d.path, fmt.Sprintf("%d-%d.%s-%d", ino, seq, s, keep))
	}
	return filepath.Join(d.path, fmt.Sprintf("%d-%d.%s", ino, seq, s))
}

// Create makes an empty staging file for inode ino, in state Open.
func (d *Dir) Create(ino uint64) (*File, error) {
	seq := d.seq.Add(1)
	f, err := os.OpenFile(d.name(ino, seq, Open, 0), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create staging file: %w", err)
	}
	return &File{dir: d, Ino: ino, seq: seq, state: Open, File: f}, nil
}

// Path is the file's name now (os.File's Name is the name it was created
// with).
func (f *File) Path() string { return f.dir.name(f.Ino, f.seq, f.state, f.keep) }

// State is the file's state.
func (f *File) State() State { return f.state }

// Keep is, in state Appending, the size of the closed save the file starts
// with.
func (f *File) Keep() int64 { return f.keep }

// Mark moves the file to state s (a rename: it survives the daemon).
func (f *File) Mark(s State) error {
	if f.state == s {
		return nil
	}
	return f.rename(s, 0)
}

// MarkAppending moves the closed file, of size bytes, to state Appending:
// a writer appends to it, and its first size bytes stay the closed save.
func (f *File) MarkAppending(size int64) error {
	if f.state == Appending && f.keep == size {
		return nil
	}
	return f.rename(Appending, size)
}

func (f *File) rename(s State, keep int64) error {
	if err := os.Rename(f.Path(), f.dir.name(f.Ino, f.seq, s, keep)); err != nil {
		return fmt.Errorf("staging file of inode %d: %w", f.Ino, err)
	}
	f.state, f.keep = s, keep
	return nil
}

// Remove deletes the file and closes it.
func (f *File) Remove() error {
	err := os.Remove(f.Path())
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, f.File.Close())
}

// Entry is a staging file found in the directory.
type Entry struct {
	Ino   uint64
	Seq   uint64
	State State
	Keep  int64 // Appending: the size of the closed save it starts with
	Path  string
}

// Reopen opens the staging file of entry e, found by List.
func (d *Dir) Reopen(e Entry) (*File, error) {
	f, err := os.OpenFile(d.name(e.Ino, e.Seq, e.State, e.Keep), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open staging file: %w", err)
	}
	return &File{dir: d, Ino: e.Ino, seq: e.Seq, state: e.State, keep: e.Keep, File: f}, nil
}

// ClosedSave turns e, a file left Appending, into the closed save it
// starts with: cut to that size, and Closed. Other entries are returned
// as they are.
func (d *Dir) ClosedSave(e Entry) (Entry, error) {
	if e.State != Appending {
		return e, nil
	}
	if err := os.Truncate(e.Path, e.Keep); err != nil {
		return e, fmt.Errorf("staging file of inode %d: %w", e.Ino, err)
	}
	closed := d.name(e.Ino, e.Seq, Closed, 0)
	if err := os.Rename(e.Path, closed); err != nil {
		return e, fmt.Errorf("staging file of inode %d: %w", e.Ino, err)
	}
	e.State, e.Keep, e.Path = Closed, 0, closed
	return e, nil
}

// List returns the staging files in the directory, skipping names that are
// not staging files.
func (d *Dir) List() ([]Entry, error) {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("list staging files: %w", err)
	}
	var out []Entry
	for _, de := range des {
		e, ok := parseName(de.Name())
		if !ok {
			continue
		}
		e.Path = filepath.Join(d.path, de.Name())
		out = append(out, e)
	}
	return out, nil
}

// parseName reads "<ino>-<seq>.<state>".
func parseName(name string) (Entry, bool) {
	stem, state, ok := strings.Cut(name, ".")
	if !ok {
		return Entry{}, false
	}
	inoStr, seqStr, ok := strings.Cut(stem, "-")
	if !ok {
		return Entry{}, false
	}
	ino, err := strconv.ParseUint(inoStr, 10, 64)
	if err != nil {
		return Entry{}, false
	}
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if err != nil {
		return Entry{}, false
	}
	switch s := State(state); s {
	case Open, Closed, Done:
		return Entry{Ino: ino, Seq: seq, State: s}, true
	}
	if size, ok := strings.CutPrefix(state, string(Appending)+"-"); ok {
		keep, err := strconv.ParseInt(size, 10, 64)
		if err == nil && keep >= 0 {
			return Entry{Ino: ino, Seq: seq, State: Appending, Keep: keep}, true
		}
	}
	return Entry{}, false
}

// Extents calls fn for each run of data in f's first size bytes, skipping
// holes (SEEK_DATA/SEEK_HOLE; a filesystem without them reports one run).
func Extents(f *os.File, size int64, fn func(off, n int64) error) error {
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return fn(off, size-off) // no SEEK_DATA: all data
		}
		if data >= size {
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole > size {
			hole = size
		}
		if err := fn(data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

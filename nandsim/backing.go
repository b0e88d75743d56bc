package nandsim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Backing says where the pages' content lives. The FTL only decides where a
// page would be and what it costs; content is kept by logical page number,
// so it survives the loss of the FTL state. The zero value is NoBacking.
type Backing struct {
	kind backingKind
	path string
}

type backingKind uint8

const (
	backingNone backingKind = iota
	backingMemory
	backingFile
)

// NoBacking discards content: reads return zeros. For the shadow device and
// for write-cost estimates.
func NoBacking() Backing { return Backing{kind: backingNone} }

// MemoryBacking keeps content in memory (tests, offline replay).
func MemoryBacking() Backing { return Backing{kind: backingMemory} }

// FileBacking keeps content in a sparse file at path, page lpn at byte
// lpn x PageSize; trimmed pages become holes.
func FileBacking(path string) Backing { return Backing{kind: backingFile, path: path} }

func (b Backing) String() string {
	switch b.kind {
	case backingMemory:
		return "memory"
	case backingFile:
		return "file " + b.path
	default:
		return "none"
	}
}

// store is an open backing. Offsets and lengths are whole pages.
type store interface {
	writeAt(p []byte, off int64) error
	readAt(p []byte, off int64) error // holes and unwritten pages read as zeros
	trim(off, n int64) error
	sync() error
	close() error
	// pages calls fn for each run of pages that may hold data, ascending.
	pages(pageSize int64, fn func(lpn, n int64)) error
}

func (b Backing) open(pageSize int) (store, error) {
	switch b.kind {
	case backingMemory:
		return &memStore{pageSize: int64(pageSize), data: map[int64][]byte{}}, nil
	case backingFile:
		// O_NOFOLLOW: a symlink planted in the store is not followed.
		f, err := os.OpenFile(b.path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open backing file: %w", err)
		}
		return &fileStore{f: f}, nil
	default:
		return noStore{}, nil
	}
}

type noStore struct{}

func (noStore) writeAt([]byte, int64) error { return nil }
func (noStore) readAt(p []byte, _ int64) error {
	clear(p)
	return nil
}
func (noStore) trim(int64, int64) error               { return nil }
func (noStore) sync() error                           { return nil }
func (noStore) close() error                          { return nil }
func (noStore) pages(int64, func(lpn, n int64)) error { return nil }

// memStore holds one slice per written page.
type memStore struct {
	mu       sync.RWMutex
	pageSize int64
	data     map[int64][]byte
}

func (m *memStore) writeAt(p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := int64(0); i < int64(len(p)); i += m.pageSize {
		lpn := (off + i) / m.pageSize
		pg := m.data[lpn]
		if pg == nil {
			pg = make([]byte, m.pageSize)
			m.data[lpn] = pg
		}
		copy(pg, p[i:i+m.pageSize])
	}
	return nil
}

func (m *memStore) readAt(p []byte, off int64) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i := int64(0); i < int64(len(p)); i += m.pageSize {
		dst := p[i : i+m.pageSize]
		if pg := m.data[(off+i)/m.pageSize]; pg != nil {
			copy(dst, pg)
		} else {
			clear(dst)
		}
	}
	return nil
}

func (m *memStore) trim(off, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for lpn := off / m.pageSize; lpn < (off+n)/m.pageSize; lpn++ {
		delete(m.data, lpn)
	}
	return nil
}

func (m *memStore) sync() error  { return nil }
func (m *memStore) close() error { return nil }

func (m *memStore) pages(pageSize int64, fn func(lpn, n int64)) error {
	m.mu.RLock()
	lpns := make([]int64, 0, len(m.data))
	for lpn := range m.data {
		lpns = append(lpns, lpn)
	}
	m.mu.RUnlock()
	slices.Sort(lpns)
	for _, lpn := range lpns {
		fn(lpn, 1)
	}
	return nil
}

// fileStore is a sparse file; pwrite/pread make it safe for concurrent use.
type fileStore struct{ f *os.File }

func (s *fileStore) writeAt(p []byte, off int64) error {
	if _, err := s.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("backing write at %d: %w", off, err)
	}
	return nil
}

func (s *fileStore) readAt(p []byte, off int64) error {
	n, err := s.f.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		clear(p[n:]) // past the end of the file: never written
		return nil
	}
	if err != nil {
		return fmt.Errorf("backing read at %d: %w", off, err)
	}
	return nil
}

// trim punches a hole; where the file system cannot, it writes zeros, so a
// trimmed page reads as zeros either way.
func (s *fileStore) trim(off, n int64) error {
	err := unix.Fallocate(int(s.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("backing punch hole at %d+%d: %w", off, n, err)
	}
	size, err := s.size()
	if err != nil {
		return err
	}
	n = min(n, size-off) // never extend the file with zeros
	zeros := make([]byte, min(n, 1<<20))
	for done := int64(0); done < n; done += int64(len(zeros)) {
		chunk := zeros[:min(int64(len(zeros)), n-done)]
		if _, err := s.f.WriteAt(chunk, off+done); err != nil {
			return fmt.Errorf("backing zero trimmed range at %d: %w", off+done, err)
		}
	}
	return nil
}

func (s *fileStore) size() (int64, error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("backing stat: %w", err)
	}
	return st.Size(), nil
}

func (s *fileStore) sync() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("backing sync: %w", err)
	}
	return nil
}

func (s *fileStore) close() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("backing close: %w", err)
	}
	return nil
}

// pages walks the file's data extents with SEEK_DATA/SEEK_HOLE. Where the
// file system does not report holes the whole file is one extent.
func (s *fileStore) pages(pageSize int64, fn func(lpn, n int64)) error {
	size, err := s.size()
	if err != nil {
		return err
	}
	fd := int(s.f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			start = off // no SEEK_DATA: assume data
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			end = size
		}
		first := start / pageSize
		last := (min(end, size) + pageSize - 1) / pageSize
		if last > first {
			fn(first, last-first)
		}
		if end <= off {
			break
		}
		off = end
	}
	return nil
}

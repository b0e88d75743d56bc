package fs

import (
	"errors"
	"fmt"
	"os"

	"github.com/ckptfs/ckptfs/chain"
	"golang.org/x/sys/unix"
)

// Free space and fallocate. The free space a mount reports (statfs, df) is
// the simulated device's, less what fallocate holds for files being
// written; the staging files' host filesystem does not show. Writes are
// not checked against it until their commit, but fallocate(2) promises the
// space at once, so it is checked against it then: a fallocate needs the
// device pages of the holes in its range, and fails with ENOSPC, changing
// nothing, where they are more than df shows free. Once done it holds the
// pages the host allocated for it (chain's ReserveSpace): df counts them as
// used, and st_blocks of the file counts its staging file's allocated
// blocks, so writing into the range grows neither. The file's commit draws
// on what it holds for the bytes it stores, and gives back the rest when
// it ends (fallocated bytes nobody wrote are zeros, which cost nothing);
// from then on st_blocks is the file's stored bytes again (fillAttr).

// allocating reports whether a fallocate mode allocates blocks: all do
// but punching holes and collapsing or inserting ranges.
func allocating(mode uint32) bool {
	return mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) == 0
}

// reserveFallocate reserves the device pages that a fallocate of
// [off, off+size) of sf may allocate: those of the holes in the range.
// It returns the bytes reserved, for settleFallocate.
func (f *FS) reserveFallocate(ino chain.Ino, sf *stagedFile, mode uint32, off, size int64) (int64, error) {
	r := f.store
	if !allocating(mode) || size <= 0 {
		return 0, nil
	}
	ps := int64(f.store.Statfs().PageSize)
	var need int64
	err := sf.use(func(file *os.File) error {
		need = holePages(int(file.Fd()), off, off+size, ps) * ps
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := r.ReserveSpace(ino, need); err != nil {
		return 0, fmt.Errorf("fallocate %d bytes at %d: %w", size, off, err)
	}
	return need, nil
}

// settleFallocate keeps of the reserved bytes what the fallocate allocated
// on the host (the staging file's allocated bytes grew by grown), and
// gives back what it freed (punching a hole).
func (f *FS) settleFallocate(ino chain.Ino, reserved, grown int64) {
	r := f.store
	ps := int64(f.store.Statfs().PageSize)
	if grown >= 0 {
		keep := min(reserved, (grown+ps-1)/ps*ps)
		r.UnreserveSpace(ino, reserved-keep)
		return
	}
	r.UnreserveSpace(ino, reserved+(-grown)/ps*ps)
}

// holePages counts the pages of size ps that the holes of fd in
// [off, end) touch; all of the range's where fd cannot tell its holes.
func holePages(fd int, off, end, ps int64) int64 {
	pages := func(lo, hi int64) int64 { return (hi+ps-1)/ps - lo/ps }
	var n int64
	for pos := off; pos < end; {
		data, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			data = end // nothing but a hole from pos
		} else if err != nil {
			return pages(off, end)
		}
		if data = min(data, end); data > pos {
			n += pages(pos, data)
		}
		if data >= end {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return pages(off, end)
		}
		pos = hole
	}
	return n
}

// allocatedBytes is what the host filesystem allocated for sf.
func allocatedBytes(sf *stagedFile) (int64, error) {
	var st unix.Stat_t
	err := sf.use(func(file *os.File) error { return unix.Fstat(int(file.Fd()), &st) })
	return st.Blocks * 512, err
}

// fallocatedBytes is what st_blocks counts of sf, ino's staging file,
// beyond its size: while fallocate holds space for it, the blocks its
// staging file has allocated (fallocated, or written), else nothing.
func (f *FS) fallocatedBytes(ino chain.Ino, sf *stagedFile) int64 {
	if f.store.ReservedSpace(ino) == 0 {
		return 0
	}
	n, _ := allocatedBytes(sf)
	return n
}

package chain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// stagedReadBytes is the size of the reads that feed a staging file to its
// ingest where they cannot go straight into a chunk (Writer.ReadFrom): large
// enough to keep the detector and the chunker busy, small enough that the
// daemon holds no save in its memory.
const stagedReadBytes = 4 << 20

// CommitFile makes the content of f, a file staged on the host filesystem,
// the committed content of inode ino, as a sequential save of the same
// bytes into the mount would: the same detection, reference choice and
// codecs, whatever order the bytes were written in. path names the file's
// family. Holes of f (never written) cost nothing. mtime is the
// modification time to record. On failure the file keeps its previous
// content.
func (s *Store) CommitFile(ino Ino, path string, f *os.File, mtime int64) error {
	c, err := s.BeginCommitFile(ino, path)
	if err != nil {
		return err
	}
	return c.Run(f, path, mtime)
}

// FileCommit is a commit of a staged file, begun (BeginCommitFile) in the
// order the files were closed and run later: a save that finds no reference
// of its own waits for the saves of its family begun before it that run.
type FileCommit struct {
	w      *Writer
	path   string
	family string
	limit  int64 // commit only the file's first limit bytes; 0: all of it
}

// BeginCommitFile queues the commit of inode ino's staged content, in the
// order of the calls; path is the file's name now.
func (s *Store) BeginCommitFile(ino Ino, path string) (*FileCommit, error) {
	c := &FileCommit{path: path, family: policy.FamilyOf(path)}
	w, err := s.NewWriter(ino, func() string { return c.path })
	if err != nil {
		return nil, err
	}
	c.w = w
	s.committing.queue(c.family, w)
	return c, nil
}

// Limit makes Run commit only the file's first n bytes (n > 0): a closed
// save that writers have appended to since, and whose appended bytes no
// one closed or synced yet.
func (c *FileCommit) Limit(n int64) { c.limit = n }

// Abort gives up a commit begun and not run.
func (c *FileCommit) Abort() {
	c.w.Abort()
	c.w.s.committing.end(c.family, c.w)
}

// Appended tells the commit, before Run, that the staged content is the
// file's committed content with bytes appended after its first prefix
// (Writer.Appended).
func (c *FileCommit) Appended(prefix int64) { c.w.Appended(prefix) }

// Run ingests f and commits it (see CommitFile). path, the file's name
// now, decides its family, once.
func (c *FileCommit) Run(f *os.File, path string, mtime int64) error {
	w, s := c.w, c.w.s
	family := policy.FamilyOf(path)
	s.committing.run(c.family, family, w)
	c.path, c.family = path, family
	defer s.committing.end(c.family, w)
	st, err := f.Stat()
	if err != nil {
		w.Abort()
		return fmt.Errorf("commit %s: %w", path, err)
	}
	size := st.Size()
	if c.limit > 0 {
		size = min(size, c.limit)
	}
	if size > MaxFileSize {
		w.Abort()
		return fmt.Errorf("commit %s of %d bytes: %w", path, size, syscall.EFBIG)
	}
	buf := bufpool.Get(stagedReadBytes)
	defer bufpool.Put(buf)
	// The extents come in order: the writer takes each at its offset, and
	// what lies between them is a hole.
	err = staging.Extents(f, size, func(off, n int64) error {
		err := w.ReadFrom(f, off, n, mtime, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("staging file shrank under its commit: %w", err)
		}
		return err
	})
	if err == nil {
		err = w.Extend(size, mtime)
	}
	if err != nil {
		w.Abort()
		return fmt.Errorf("commit %s: %w", path, err)
	}
	p, err := w.finish()
	if err != nil {
		return fmt.Errorf("commit %s: %w", path, err)
	}
	return w.commitPending(p)
}

// ErrHostFull: the host filesystem of the store has no room for a commit.
var ErrHostFull = fmt.Errorf("store's host filesystem: %w", syscall.ENOSPC)

// HostFull reports whether err is the lack of room on the host filesystem
// of the store (where the simulated device's image grows), not on the
// simulated device.
func HostFull(err error) bool {
	return err != nil && !errors.Is(err, ErrNoSpace) &&
		(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}

// KeptStaged is a staging file RecoverStaged kept: a save closed before
// the daemon died whose commit failed with Cause.
type KeptStaged struct {
	staging.Entry
	Cause error
}

// RecoverStaged ingests the staging files a daemon that died left closed
// and uncommitted, and deletes the rest: a file still open at the death
// keeps its previous content (one opened to append to its closed save
// keeps that save). Staging files of inodes that no longer exist
// (unlinked since) are deleted. A closed one whose commit fails (no room
// on the host, a full device, any error) is kept, for the filesystem to
// adopt (TakeWaitingStaged): a failure must not keep the store from
// opening, nor lose the save.
func (s *Store) RecoverStaged(dir *staging.Dir) (ingested int, err error) {
	entries, err := dir.List()
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e, err = dir.ClosedSave(e); err != nil { // appended to: its closed save
			return ingested, err
		}
		if e.State == staging.Closed {
			s.dropWaitingStaged(e.Ino) // an inode's newer save wins
			ok, err := s.recoverOne(e)
			if err != nil {
				if HostFull(err) {
					logrus.WithError(err).Warnf("staging file %s: no room on the host to commit it: it is kept", e.Path)
				} else {
					logrus.WithError(err).Errorf("staging file %s: its commit failed: it is kept, and tried again", e.Path)
				}
				s.waitingStaged = append(s.waitingStaged, KeptStaged{Entry: e, Cause: err})
				continue
			}
			if ok {
				ingested++
			}
		}
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return ingested, fmt.Errorf("remove staging file: %w", err)
		}
	}
	return ingested, nil
}

func (s *Store) recoverOne(e staging.Entry) (bool, error) {
	ino := Ino(e.Ino)
	n, err := s.Names().Inode(ino)
	if err != nil || n.Nlink == 0 || n.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false, nil // gone: nothing to keep
	}
	path, err := s.Names().PathOf(ino)
	if err != nil {
		return false, nil
	}
	f, err := os.Open(e.Path)
	if err != nil {
		return false, fmt.Errorf("recover staging file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("recover staging file: %w", err)
	}
	if err := s.CommitFile(ino, path, f, st.ModTime().UnixNano()); err != nil {
		return false, fmt.Errorf("recover %s (inode %d) from its staging file: %w", path, ino, err)
	}
	logrus.Infof("recovered %s (inode %d, %d bytes) closed before the daemon stopped", path, ino, st.Size())
	return true, nil
}

// dropWaitingStaged deletes the staging file kept for inode ino, if any.
func (s *Store) dropWaitingStaged(ino uint64) {
	kept := s.waitingStaged[:0]
	for _, w := range s.waitingStaged {
		if w.Ino != ino {
			kept = append(kept, w)
		} else if err := os.Remove(w.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			logrus.WithError(err).Warn("remove staging file")
		}
	}
	s.waitingStaged = kept
}

// TakeWaitingStaged returns, once, the staging files RecoverStaged kept:
// saves closed before the daemon died, to be served and committed by the
// filesystem (fs.FS.AdoptStaged).
func (s *Store) TakeWaitingStaged() []KeptStaged {
	w := s.waitingStaged
	s.waitingStaged = nil
	return w
}

// ChargeStaged charges the device for bytes of a staging file that the
// host would have written back before the store encoded it (docs/NANDSIM.md,
// "staging files").
func (s *Store) ChargeStaged(bytes int64) {
	if s.wear == nil || bytes <= 0 {
		return
	}
	ps := s.wear.PageSize()
	s.wear.Staged((bytes + ps - 1) / ps)
}

// HoldContent keeps inode ino's committed version (and what it is coded
// against) from being freed until release is called, whatever happens to
// the inode meanwhile. A file with no content holds nothing (release nil).
func (s *Store) HoldContent(ino Ino) (release func(), err error) {
	release, err = s.hold(func(tx *meta.Tx) ([]meta.VersionID, error) {
		n, err := tx.Inode(ino)
		if err != nil || n.Version == 0 {
			return nil, err
		}
		return []meta.VersionID{n.Version}, nil
	})
	return release, err
}

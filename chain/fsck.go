package chain

import (
	"fmt"
	"io"
	"sort"

	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/meta"
)

// Problem is one inconsistency found by Check.
type Problem struct {
	Kind   string `json:"kind"` // dangling-reference, leak, overlap, corrupt-chunk, ...
	Detail string `json:"detail"`
}

func (p Problem) String() string { return p.Kind + ": " + p.Detail }

// CheckReport is the result of Check.
type CheckReport struct {
	Inodes   int       `json:"inodes"`
	Versions int       `json:"versions"`
	Chunks   int       `json:"chunks"`
	Verified int       `json:"files_verified"` // deep: files rebuilt and checksummed
	Problems []Problem `json:"problems"`
}

// Check verifies the store on its own terms, without trusting the counts the
// writer keeps: it recounts links and dependents from the records, checks
// that every chunk's reference exists, that the chunks of each version tile
// it, and that pages are either free or owned by exactly one version (none
// leaked, none shared). With deep it also rebuilds every live file and
// checks its whole-file checksum (which reads every chunk its deltas need).
func (s *Store) Check(deep bool) (*CheckReport, error) {
	rep := &CheckReport{}
	add := func(kind, format string, args ...any) {
		rep.Problems = append(rep.Problems, Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	var live []meta.Version
	err := s.view(func(tx *txn) error {
		inodes, err := namespace.Verify(tx.mtx, add)
		if err != nil {
			return err
		}
		rep.Inodes = len(inodes)
		versions := map[meta.VersionID]*meta.Version{}
		dependents := map[meta.VersionID]uint32{}
		err = tx.mtx.ForEachVersion(func(v *meta.Version) error {
			versions[v.ID] = v
			if v.Ref != 0 {
				dependents[v.Ref]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		rep.Versions = len(versions)
		owners := map[meta.VersionID]meta.Ino{}
		for _, n := range inodes {
			if n.Version == 0 {
				continue
			}
			v, ok := versions[n.Version]
			switch {
			case !ok:
				add("dangling-reference", "inode %d points at missing version %d", n.Ino, n.Version)
			case v.Size != n.Size:
				add("size-mismatch", "inode %d size %d, its version %d has %d", n.Ino, n.Size, v.ID, v.Size)
			}
			owners[n.Version] = n.Ino
		}
		for id, v := range versions {
			_, owned := owners[id]
			if v.Live != owned {
				add("liveness", "version %d live=%v but owned by an inode=%v", id, v.Live, owned)
			}
			if v.Live {
				live = append(live, *v)
			}
			if v.Dependents != dependents[id] {
				add("refcount", "version %d records %d dependents, %d found", id, v.Dependents, dependents[id])
			}
			if !v.Live && dependents[id] == 0 {
				add("leak", "version %d is neither live nor needed by another version", id)
			}
			if v.Ref != 0 {
				ref, ok := versions[v.Ref]
				if !ok {
					add("dangling-reference", "version %d deltas against missing version %d", id, v.Ref)
				} else if v.Depth != ref.Depth+1 {
					add("depth", "version %d depth %d, its reference %d has %d", id, v.Depth, v.Ref, ref.Depth)
				}
			}
			n, err := checkChunks(tx, v, versions[v.Ref], int64(s.blockSize), add)
			if err != nil {
				return err
			}
			rep.Chunks += n
		}
		checkFamilies(tx, versions, add)
		return checkSpace(tx, s, versions, add)
	})
	if err != nil {
		return rep, fmt.Errorf("check: %w", err)
	}
	if deep {
		sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
		for _, v := range live {
			if err := s.verifyVersion(v.ID); err != nil {
				add("corrupt-chunk", "version %d (inode %d): %v", v.ID, v.Ino, err)
			}
			rep.Verified++
		}
	}
	return rep, nil
}

// verifyVersion reads a whole version; the reader checks the file checksum.
func (s *Store) verifyVersion(id meta.VersionID) error {
	r, err := s.OpenVersion(id)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < r.Size(); {
		end, err := r.skipZeros(off)
		if err != nil {
			return err
		}
		if end > off {
			off = end
			continue
		}
		n, err := r.ReadAt(buf, off)
		off += int64(n)
		if err == io.EOF && off >= r.Size() {
			break
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkChunks checks that v's chunks tile [0, Size), lie inside its pack and
// have their references.
func checkChunks(tx *txn, v, ref *meta.Version, pageSize int64, add func(string, string, ...any)) (int, error) {
	var next int64
	n := 0
	capacity := v.PackPages() * pageSize
	if v.PackBytes > capacity {
		add("pack", "version %d records %d pack bytes in %d bytes of pages", v.ID, v.PackBytes, capacity)
	}
	err := tx.mtx.ForEachChunk(v.ID, func(c *meta.Chunk) error {
		n++
		if c.Offset != next {
			add("chunk-tiling", "version %d: chunk at %d, expected one at %d", v.ID, c.Offset, next)
		}
		next = c.End()
		if c.Zeros() {
			if c.Delta {
				add("pack", "version %d chunk at %d: zeros (no encoded bytes) recorded as a delta", v.ID, c.Offset)
			}
			return nil
		}
		if c.PackOff < 0 || c.EncLen < 0 || c.PackOff+c.EncLen > v.PackBytes {
			add("pack", "version %d chunk at %d: encoded bytes [%d,+%d) outside the pack of %d", v.ID, c.Offset, c.PackOff, c.EncLen, v.PackBytes)
		}
		if !c.Delta {
			return nil
		}
		if ref == nil {
			add("dangling-reference", "version %d chunk at %d is a delta but the version has no reference", v.ID, c.Offset)
			return nil
		}
		rc, err := tx.mtx.ChunkAt(ref.ID, c.RefOffset)
		if err != nil {
			add("dangling-reference", "version %d chunk at %d: reference chunk %d@%d missing", v.ID, c.Offset, ref.ID, c.RefOffset)
			return nil
		}
		if rc.Length != c.Length {
			add("dangling-reference", "version %d chunk at %d: reference chunk has %d bytes, want %d", v.ID, c.Offset, rc.Length, c.Length)
		}
		return nil
	})
	if next != v.Size {
		add("chunk-tiling", "version %d: chunks cover %d bytes of %d", v.ID, next, v.Size)
	}
	return n, err
}

func checkFamilies(tx *txn, versions map[meta.VersionID]*meta.Version, add func(string, string, ...any)) {
	_ = tx.mtx.ForEachFamily(func(f *meta.Family) error {
		for _, id := range []meta.VersionID{f.Last, f.Baseline} {
			if _, ok := versions[id]; id != 0 && !ok {
				add("dangling-reference", "family %q points at missing version %d", f.Name, id)
			}
		}
		return nil
	})
}

// checkSpace checks that the backend's space is free or owned by one
// version, and the shadow device's pages likewise.
func checkSpace(tx *txn, s *Store, versions map[meta.VersionID]*meta.Version, add func(string, string, ...any)) error {
	var used []storage.Owned
	for id, v := range versions {
		for _, e := range v.Pack {
			used = append(used, storage.Owned{Extent: e, Owner: fmt.Sprintf("version %d", id)})
		}
	}
	if err := s.data.Check(tx.mtx, used, add); err != nil {
		return err
	}
	if s.wear == nil {
		return nil
	}
	return s.wear.CheckShadow(tx.mtx, add)
}

package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// A version's record, segments and chunks share one bucket under keys that
// start with the version number, so that a commit or a deletion rewrites one
// run of leaf pages instead of three trees' (format 2; see docs/STORE.md).
const (
	tagVersion byte = 0
	tagSegment byte = 1
	tagChunk   byte = 2
)

// versionKey is the key of a version's record: version (8) ‖ 0.
func versionKey(id VersionID) []byte {
	return append(u64key(uint64(id)), tagVersion)
}

// partKey is the key of a segment (n = index) or chunk (n = file offset):
// version (8) ‖ tag ‖ n (8).
func partKey(id VersionID, tag byte, n uint64) []byte {
	k := make([]byte, 17)
	binary.BigEndian.PutUint64(k, uint64(id))
	k[8] = tag
	binary.BigEndian.PutUint64(k[9:], n)
	return k
}

// NewVersionID reserves a version number.
func (tx *Tx) NewVersionID() (VersionID, error) {
	id, err := tx.nextID("next_version")
	return VersionID(id), err
}

// Version reads a version record.
func (tx *Tx) Version(id VersionID) (*Version, error) {
	b := tx.tx.Bucket(bucketVersions).Get(versionKey(id))
	if b == nil {
		return nil, fmt.Errorf("version %d: %w", id, ErrNotFound)
	}
	v := new(Version)
	if err := v.unmarshal(b); err != nil {
		return nil, fmt.Errorf("version %d: %w", id, err)
	}
	return v, nil
}

// PutVersion writes a version record.
func (tx *Tx) PutVersion(v *Version) error {
	return tx.bucket(bucketVersions).Put(versionKey(v.ID), v.marshal())
}

// DeleteVersion removes a version with its segments and chunks. Its pack
// extents are the caller's to free.
func (tx *Tx) DeleteVersion(id VersionID) error {
	return tx.deletePrefix(bucketVersions, u64key(uint64(id)))
}

// ForEachVersion calls fn for every version in number order. It visits
// only the version records, seeking past each version's segments and chunks.
func (tx *Tx) ForEachVersion(fn func(*Version) error) error {
	c := tx.tx.Bucket(bucketVersions).Cursor()
	for k, b := c.First(); k != nil; {
		id := keyU64(k)
		if len(k) == len(versionKey(0)) && k[8] == tagVersion {
			v := new(Version)
			if err := v.unmarshal(b); err != nil {
				return fmt.Errorf("version %d: %w", id, err)
			}
			if err := fn(v); err != nil {
				return err
			}
		}
		if id == math.MaxUint64 {
			return nil
		}
		k, b = c.Seek(u64key(id + 1))
	}
	return nil
}

// PutSegment records a segment of version id.
func (tx *Tx) PutSegment(id VersionID, s *Segment) error {
	return tx.bucket(bucketVersions).Put(partKey(id, tagSegment, uint64(s.Index)), s.marshal())
}

// Segments lists a version's segments in order.
func (tx *Tx) Segments(id VersionID) ([]Segment, error) {
	var out []Segment
	prefix := partKey(id, tagSegment, 0)[:9]
	c := tx.tx.Bucket(bucketVersions).Cursor()
	for k, b := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, b = c.Next() {
		var s Segment
		if err := s.unmarshal(b); err != nil {
			return nil, fmt.Errorf("version %d segment: %w", id, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// PutChunk records a chunk of version id.
func (tx *Tx) PutChunk(id VersionID, c *Chunk) error {
	return tx.bucket(bucketVersions).Put(partKey(id, tagChunk, uint64(c.Offset)), c.marshal())
}

// Chunks appends to dst up to max chunks of version id, in file order, starting
// with the chunk that contains file offset from (or the first after it).
func (tx *Tx) Chunks(dst []Chunk, id VersionID, from int64, max int) ([]Chunk, error) {
	start := partKey(id, tagChunk, uint64(from))
	prefix := start[:9]
	cur := tx.tx.Bucket(bucketVersions).Cursor()
	k, b := cur.Seek(start)
	// The chunk containing from starts at or before it: step back one.
	if k == nil || !bytes.HasPrefix(k, prefix) || int64(keyU64(k[9:])) > from {
		if pk, pb := prevItem(cur, k); pk != nil && bytes.HasPrefix(pk, prefix) {
			k, b = pk, pb
		} else {
			k, b = cur.Seek(start) // restore the position
		}
	}
	for n := 0; k != nil && bytes.HasPrefix(k, prefix) && n < max; k, b = cur.Next() {
		var c Chunk
		if err := c.unmarshal(b); err != nil {
			return dst, fmt.Errorf("version %d chunk at %d: %w", id, int64(keyU64(k[9:])), err)
		}
		if c.End() <= from {
			continue
		}
		dst = append(dst, c)
		n++
	}
	return dst, nil
}

// ChunkAt returns the chunk of version id that starts exactly at file offset off.
func (tx *Tx) ChunkAt(id VersionID, off int64) (*Chunk, error) {
	b := tx.tx.Bucket(bucketVersions).Get(partKey(id, tagChunk, uint64(off)))
	if b == nil {
		return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, ErrNotFound)
	}
	c := new(Chunk)
	if err := c.unmarshal(b); err != nil {
		return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, err)
	}
	return c, nil
}

// ForEachChunk calls fn for each chunk of version id in file order.
func (tx *Tx) ForEachChunk(id VersionID, fn func(*Chunk) error) error {
	var batch []Chunk
	var from int64
	for {
		var err error
		batch, err = tx.Chunks(batch[:0], id, from, 1024)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for i := range batch {
			if err := fn(&batch[i]); err != nil {
				return err
			}
		}
		last := batch[len(batch)-1]
		if last.Length == 0 || last.End() == math.MaxInt64 {
			return nil
		}
		from = last.End()
	}
}

// Family reads a family record.
func (tx *Tx) Family(name string) (*Family, error) {
	b := tx.tx.Bucket(bucketFamilies).Get([]byte(name))
	if b == nil {
		return nil, fmt.Errorf("family %q: %w", name, ErrNotFound)
	}
	f := new(Family)
	if err := f.unmarshal(b); err != nil {
		return nil, fmt.Errorf("family %q: %w", name, err)
	}
	return f, nil
}

// PutFamily writes a family record.
func (tx *Tx) PutFamily(f *Family) error {
	return tx.bucket(bucketFamilies).Put([]byte(f.Name), f.marshal())
}

// ForEachFamilyPrefix calls fn for every family whose name starts with
// prefix, in name order.
func (tx *Tx) ForEachFamilyPrefix(prefix string, fn func(*Family) error) error {
	c := tx.tx.Bucket(bucketFamilies).Cursor()
	for k, b := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, b = c.Next() {
		f := new(Family)
		if err := f.unmarshal(b); err != nil {
			return fmt.Errorf("family %q: %w", k, err)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// ForEachFamily calls fn for every family in name order.
func (tx *Tx) ForEachFamily(fn func(*Family) error) error {
	return tx.tx.Bucket(bucketFamilies).ForEach(func(k, b []byte) error {
		f := new(Family)
		if err := f.unmarshal(b); err != nil {
			return fmt.Errorf("family %q: %w", k, err)
		}
		return fn(f)
	})
}

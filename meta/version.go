package meta

import (
	"fmt"
	"math"
)

// NewVersionID reserves a version number.
func (tx *Tx) NewVersionID() (VersionID, error) {
	id, err := tx.nextID("next_version")
	return VersionID(id), err
}

// Version reads a version record.
func (tx *Tx) Version(id VersionID) (*Version, error) {
	b := tx.tx.Bucket(bucketVersions).Get(u64key(uint64(id)))
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
	return tx.tx.Bucket(bucketVersions).Put(u64key(uint64(v.ID)), v.marshal())
}

// DeleteVersion removes a version with its segments and chunks. Its pack
// extents are the caller's to free.
func (tx *Tx) DeleteVersion(id VersionID) error {
	if err := tx.tx.Bucket(bucketVersions).Delete(u64key(uint64(id))); err != nil {
		return err
	}
	if err := tx.deletePrefix(bucketSegments, u64key(uint64(id))); err != nil {
		return err
	}
	return tx.deletePrefix(bucketChunks, u64key(uint64(id)))
}

// ForEachVersion calls fn for every version in number order.
func (tx *Tx) ForEachVersion(fn func(*Version) error) error {
	return tx.tx.Bucket(bucketVersions).ForEach(func(k, b []byte) error {
		v := new(Version)
		if err := v.unmarshal(b); err != nil {
			return fmt.Errorf("version %d: %w", keyU64(k), err)
		}
		return fn(v)
	})
}

// PutSegment records a segment of version id.
func (tx *Tx) PutSegment(id VersionID, s *Segment) error {
	return tx.tx.Bucket(bucketSegments).Put(pairKey(uint64(id), uint64(s.Index)), s.marshal())
}

// Segments lists a version's segments in order.
func (tx *Tx) Segments(id VersionID) ([]Segment, error) {
	var out []Segment
	c := tx.tx.Bucket(bucketSegments).Cursor()
	for k, b := c.Seek(pairKey(uint64(id), 0)); k != nil && keyU64(k) == uint64(id); k, b = c.Next() {
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
	return tx.tx.Bucket(bucketChunks).Put(pairKey(uint64(id), uint64(c.Offset)), c.marshal())
}

// Chunks appends to dst up to max chunks of version id, in file order, starting
// with the chunk that contains file offset from (or the first after it).
func (tx *Tx) Chunks(dst []Chunk, id VersionID, from int64, max int) ([]Chunk, error) {
	cur := tx.tx.Bucket(bucketChunks).Cursor()
	k, b := cur.Seek(pairKey(uint64(id), uint64(from)))
	// The chunk containing from starts at or before it: step back one.
	if k == nil || keyU64(k) != uint64(id) || int64(keyU64(k[8:])) > from {
		if pk, pb := cur.Prev(); pk != nil && keyU64(pk) == uint64(id) {
			k, b = pk, pb
		} else {
			k, b = cur.Seek(pairKey(uint64(id), uint64(from))) // restore the position
		}
	}
	for n := 0; k != nil && keyU64(k) == uint64(id) && n < max; k, b = cur.Next() {
		var c Chunk
		if err := c.unmarshal(b); err != nil {
			return dst, fmt.Errorf("version %d chunk at %d: %w", id, int64(keyU64(k[8:])), err)
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
	b := tx.tx.Bucket(bucketChunks).Get(pairKey(uint64(id), uint64(off)))
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
	return tx.tx.Bucket(bucketFamilies).Put([]byte(f.Name), f.marshal())
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

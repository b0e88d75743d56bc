package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Format is the on-disk format this ckptfs writes (docs/STORE.md).
const Format = 2

var keyFormat = []byte("format")

// ErrNewerFormat reports a store written by a newer ckptfs.
var ErrNewerFormat = errors.New("store was written by a newer ckptfs")

// checkFormat refuses a store of a newer format, upgrades an older one and
// records the current format, all in the opening transaction.
func checkFormat(tx *bolt.Tx) error {
	c := tx.Bucket(bucketConfig)
	if v := c.Get(keyFormat); len(v) == 8 && binary.BigEndian.Uint64(v) > Format {
		return fmt.Errorf("format %d, this ckptfs reads up to %d: %w", binary.BigEndian.Uint64(v), Format, ErrNewerFormat)
	}
	if err := migrateV1(tx); err != nil {
		return fmt.Errorf("upgrade from format 1: %w", err)
	}
	return c.Put(keyFormat, binary.BigEndian.AppendUint64(nil, Format))
}

// Format 1 kept version records, segments and chunks in three buckets
// (versions: version (8); segments: version (8) ‖ index (8); chunks:
// version (8) ‖ offset (8)), and shadow extents in their own (shadow: ino
// (8)) and directory entries likewise (dirents: parent (8) ‖ name). Format
// 2 keeps the first three in one bucket, and shadow extents and directory
// entries beside their inodes.
var (
	bucketV1Segments = []byte("segments")
	bucketV1Chunks   = []byte("chunks")
	bucketV1Shadow   = []byte("shadow")
	bucketV1Dirents  = []byte("dirents")
)

// migrateV1 upgrades a format 1 store; it does nothing to a format 2 one.
func migrateV1(tx *bolt.Tx) error {
	if err := migrateV1Versions(tx); err != nil {
		return err
	}
	if err := migrateV1Dirents(tx); err != nil {
		return err
	}
	return migrateV1Shadow(tx)
}

// migrateV1Dirents moves directory entries beside their directories.
func migrateV1Dirents(tx *bolt.Tx) error {
	old := tx.Bucket(bucketV1Dirents)
	if old == nil {
		return nil
	}
	inodes := tx.Bucket(bucketInodes)
	err := old.ForEach(func(k, v []byte) error {
		if len(k) <= 8 {
			return fmt.Errorf("dirents: key of %d bytes", len(k))
		}
		return inodes.Put(direntKey(Ino(keyU64(k)), string(k[8:])), append([]byte(nil), v...))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bucketV1Dirents)
}

// migrateV1Shadow moves the shadow extents beside their inodes.
func migrateV1Shadow(tx *bolt.Tx) error {
	old := tx.Bucket(bucketV1Shadow)
	if old == nil {
		return nil
	}
	inodes := tx.Bucket(bucketInodes)
	err := old.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("shadow: key of %d bytes", len(k))
		}
		return inodes.Put(shadowKey(Ino(keyU64(k))), append([]byte(nil), v...))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bucketV1Shadow)
}

// migrateV1Versions moves a format 1 store's segments and chunks into the
// versions bucket under format 2 keys, inside the opening transaction, so an
// upgrade either completes or leaves the store as it was.
func migrateV1Versions(tx *bolt.Tx) error {
	segs, chunks := tx.Bucket(bucketV1Segments), tx.Bucket(bucketV1Chunks)
	if segs == nil && chunks == nil {
		return nil
	}
	versions := tx.Bucket(bucketVersions)
	// Version records had 8-byte keys; take them out before adding any
	// format 2 key to the same bucket.
	type record struct{ k, v []byte }
	var old []record
	err := versions.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("versions: key of %d bytes in a format 1 store", len(k))
		}
		old = append(old, record{k: append([]byte(nil), k...), v: append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range old {
		if err := versions.Delete(r.k); err != nil {
			return err
		}
		if err := versions.Put(versionKey(VersionID(keyU64(r.k))), r.v); err != nil {
			return err
		}
	}
	move := func(b *bolt.Bucket, name []byte, tag byte) error {
		if b == nil {
			return nil
		}
		err := b.ForEach(func(k, v []byte) error {
			if len(k) != 16 {
				return fmt.Errorf("%s: key of %d bytes", name, len(k))
			}
			return versions.Put(partKey(VersionID(keyU64(k)), tag, keyU64(k[8:])), append([]byte(nil), v...))
		})
		if err != nil {
			return err
		}
		return tx.DeleteBucket(name)
	}
	if err := move(segs, bucketV1Segments, tagSegment); err != nil {
		return err
	}
	return move(chunks, bucketV1Chunks, tagChunk)
}

package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Format is the on-disk format this ckptfs writes (docs/STORE.md). Format
// 3 writes version records of record version 2 (path, declared layout,
// fallback, reference reason): a format 2 store needs no migration (its
// records stay readable), only the new number, so that a ckptfs that knows
// format 2 refuses the store at open instead of failing on its first
// version record. Format 4 adds chunks of zeros (EncLen 0: a hole or a
// run of zeros, stored as nothing), which a ckptfs of format 3 would fail
// to decode; its records are those of format 3. Format 5 adds encoded
// chunks of chunk format 3 (nested sparse records, encode/planeblock.go),
// which a ckptfs of format 4 would take for corrupt; its records are those
// of format 4.
const Format = 5

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
// It runs inside the opening transaction, so an upgrade either completes or
// leaves the store as it was.
func migrateV1(tx *bolt.Tx) error {
	if tx.Bucket(bucketV1Segments) != nil || tx.Bucket(bucketV1Chunks) != nil {
		if err := rekeyV1Versions(tx.Bucket(bucketVersions)); err != nil {
			return err
		}
	}
	moves := []struct {
		from  []byte
		to    []byte
		rekey func(k []byte) ([]byte, bool)
	}{
		{bucketV1Segments, bucketVersions, func(k []byte) ([]byte, bool) {
			return partKey(VersionID(keyU64(k)), tagSegment, keyU64(k[8:])), len(k) == 16
		}},
		{bucketV1Chunks, bucketVersions, func(k []byte) ([]byte, bool) {
			return partKey(VersionID(keyU64(k)), tagChunk, keyU64(k[8:])), len(k) == 16
		}},
		{bucketV1Dirents, bucketInodes, func(k []byte) ([]byte, bool) {
			return direntKey(Ino(keyU64(k)), string(k[min(8, len(k)):])), len(k) > 8
		}},
		{bucketV1Shadow, bucketInodes, func(k []byte) ([]byte, bool) {
			return shadowKey(Ino(keyU64(k))), len(k) == 8
		}},
	}
	for _, m := range moves {
		if err := moveRecords(tx, m.from, m.to, m.rekey); err != nil {
			return err
		}
	}
	return nil
}

// rekeyV1Versions gives format 1 version records (8-byte keys) their
// format 2 keys, before any other format 2 key joins the bucket.
func rekeyV1Versions(versions *bolt.Bucket) error {
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
	return nil
}

// moveRecords moves every record of bucket from, if it exists, into bucket
// to under the key rekey gives (false: a malformed key), then drops from.
func moveRecords(tx *bolt.Tx, from, to []byte, rekey func(k []byte) ([]byte, bool)) error {
	old := tx.Bucket(from)
	if old == nil {
		return nil
	}
	dst := tx.Bucket(to)
	err := old.ForEach(func(k, v []byte) error {
		nk, ok := rekey(k)
		if !ok {
			return fmt.Errorf("%s: malformed key %x", from, k)
		}
		return dst.Put(nk, append([]byte(nil), v...))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(from)
}

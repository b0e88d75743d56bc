package meta

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// prevItem steps c back to the item before at, the key c is on (nil: c is
// past the last key). bbolt's Cursor.Prev answers nil when it lands on a
// leaf that deletes earlier in the same write transaction emptied (bbolt
// removes such leaves only at commit), as it does at the start of the
// bucket. A logged update's transaction stays open across many changes and
// views read through it, so a freed version's deleted chunks made Prev
// miss the chunk a read needed, and freed extents miss the free neighbour
// they touch. A nil is therefore the start only when the bucket has no key
// before at; otherwise Prev is called again, each call leaving one more
// empty leaf behind.
func prevItem(c *bolt.Cursor, at []byte) (k, v []byte) {
	first, _ := c.Bucket().Cursor().First()
	if first == nil || at != nil && bytes.Compare(first, at) >= 0 {
		return nil, nil
	}
	for {
		if k, v = c.Prev(); k != nil {
			return k, v
		}
	}
}

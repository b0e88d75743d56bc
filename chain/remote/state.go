package remote

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ckptfs/ckptfs/meta"
	bolt "go.etcd.io/bbolt"
)

// StateFile is the uploader's own database in the store directory: what is
// in the bucket already, so that a restarted daemon resumes where the last
// one stopped. It is not the store's metadata (meta.db), and its writes are
// not charged to the simulated device: they are the replica's, not the
// store's.
const StateFile = "remote.db"

var (
	bucketUploaded = []byte("uploaded") // version (8) -> uploadedRec
	bucketRoots    = []byte("roots")    // seq (8) -> JSON []meta.VersionID
	bucketRootAt   = []byte("root_at")  // seq (8) -> when it was written (ns, 8)
	bucketState    = []byte("state")    // name -> value
)

// uploadedRec is a version whose pieces and manifest are in the bucket.
type uploadedRec struct {
	Manifest string   `json:"manifest"`
	Pieces   []string `json:"pieces"`
	Logical  int64    `json:"logical"`
}

// state is the uploader's database.
type state struct{ db *bolt.DB }

func openState(dir, remote string) (*state, error) {
	db, err := bolt.Open(filepath.Join(dir, StateFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("remote state %s: %w", filepath.Join(dir, StateFile), err)
	}
	st := &state{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		s, err := tx.CreateBucketIfNotExists(bucketState)
		if err != nil {
			return err
		}
		if old := s.Get([]byte("remote")); old != nil && string(old) != remote {
			// Another bucket: nothing of what was uploaded is there.
			for _, b := range [][]byte{bucketUploaded, bucketRoots, bucketRootAt, bucketState} {
				if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
					return err
				}
			}
			if s, err = tx.CreateBucket(bucketState); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketUploaded, bucketRoots, bucketRootAt} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return s.Put([]byte("remote"), []byte(remote))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("remote state: %w", err)
	}
	return st, nil
}

func (st *state) close() error { return st.db.Close() }

func vkey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// uploaded returns the versions in the bucket.
func (st *state) uploaded() (map[meta.VersionID]uploadedRec, error) {
	out := map[meta.VersionID]uploadedRec{}
	err := st.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketUploaded).ForEach(func(k, v []byte) error {
			var r uploadedRec
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("uploaded version %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out[meta.VersionID(binary.BigEndian.Uint64(k))] = r
			return nil
		})
	})
	return out, err
}

// addUploaded records a version as in the bucket and counts what was sent.
func (st *state) addUploaded(id meta.VersionID, r uploadedRec, sent int64) error {
	b, _ := json.Marshal(r)
	return st.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketUploaded).Put(vkey(uint64(id)), b); err != nil {
			return err
		}
		s := tx.Bucket(bucketState)
		for name, d := range map[string]int64{"bytes_uploaded": sent, "logical_bytes_uploaded": r.Logical, "versions_uploaded": 1} {
			if err := putInt(s, name, getInt(s, name)+d); err != nil {
				return err
			}
		}
		return nil
	})
}

func (st *state) dropUploaded(id meta.VersionID) error {
	return st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketUploaded).Delete(vkey(uint64(id))) })
}

// addRoot records root seq and the versions it names.
func (st *state) addRoot(seq uint64, ids []meta.VersionID, treeHash string, sent int64) error {
	b, _ := json.Marshal(ids)
	return st.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketRoots).Put(vkey(seq), b); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRootAt).Put(vkey(seq), vkey(uint64(time.Now().UnixNano()))); err != nil {
			return err
		}
		s := tx.Bucket(bucketState)
		if err := putInt(s, "root_seq", int64(seq)); err != nil {
			return err
		}
		if err := putInt(s, "bytes_uploaded", getInt(s, "bytes_uploaded")+sent); err != nil {
			return err
		}
		return s.Put([]byte("tree"), []byte(treeHash))
	})
}

// roots returns the recorded roots, oldest first, and when each was
// written (0: before this was recorded).
func (st *state) roots() (seqs []uint64, ids [][]meta.VersionID, at []int64, err error) {
	err = st.db.View(func(tx *bolt.Tx) error {
		times := tx.Bucket(bucketRootAt)
		return tx.Bucket(bucketRoots).ForEach(func(k, v []byte) error {
			var l []meta.VersionID
			if err := json.Unmarshal(v, &l); err != nil {
				return err
			}
			var t int64
			if b := times.Get(k); len(b) == 8 {
				t = int64(binary.BigEndian.Uint64(b))
			}
			seqs = append(seqs, binary.BigEndian.Uint64(k))
			ids = append(ids, l)
			at = append(at, t)
			return nil
		})
	})
	return seqs, ids, at, err
}

func (st *state) dropRoot(seq uint64) error {
	return st.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketRootAt).Delete(vkey(seq)); err != nil {
			return err
		}
		return tx.Bucket(bucketRoots).Delete(vkey(seq))
	})
}

// get returns a state value.
func (st *state) get(name string) (v []byte) {
	_ = st.db.View(func(tx *bolt.Tx) error {
		v = append(v, tx.Bucket(bucketState).Get([]byte(name))...)
		return nil
	})
	return v
}

func (st *state) getInt(name string) (n int64) {
	_ = st.db.View(func(tx *bolt.Tx) error { n = getInt(tx.Bucket(bucketState), name); return nil })
	return n
}

// setInt sets a state value.
func (st *state) setInt(name string, v int64) error {
	return st.db.Update(func(tx *bolt.Tx) error { return putInt(tx.Bucket(bucketState), name, v) })
}

// addInts adds to counters.
func (st *state) addInts(d map[string]int64) error {
	return st.db.Update(func(tx *bolt.Tx) error {
		s := tx.Bucket(bucketState)
		for name, v := range d {
			if err := putInt(s, name, getInt(s, name)+v); err != nil {
				return err
			}
		}
		return nil
	})
}

func getInt(b *bolt.Bucket, name string) int64 {
	v := b.Get([]byte(name))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(b *bolt.Bucket, name string, v int64) error {
	return b.Put([]byte(name), binary.BigEndian.AppendUint64(nil, uint64(v)))
}

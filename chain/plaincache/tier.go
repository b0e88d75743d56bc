package plaincache

import (
	"sync"

	"github.com/ckptfs/ckptfs/meta"
)

// Tier keeps the plain chunks of the versions the next saves will delta
// against. An LRU cache smaller than a checkpoint would evict each chunk
// just before it is wanted (a sequential scan is LRU's worst case), so this
// tier does not evict to make room for the chunk being offered: a save
// offers its chunks while there is room, and the next save of the family
// takes each one out as it uses it, freeing room for its own. The first
// bytes of every checkpoint thus never need rebuilding through the delta
// chain; a checkpoint that fits, none of them. Under the chain scheme the
// reference is the family's baseline, used by every version: only baselines
// are offered, and they are read without being taken.
//
// Entries go stale when a family stops saving; versions of families that
// have not started a save for staleAfter saves of any family are evicted
// when room is short, oldest first.
type Tier struct {
	mu    sync.Mutex
	max   int64
	size  int64 // the capacity of the buffers kept: the memory they hold
	items map[Key][]byte
	vers  map[meta.VersionID]*tierVersion
	gen   uint64 // counts saves started
	hits  int64
}

type tierVersion struct {
	family string
	gen    uint64 // when the family last started a save or offered this
	bytes  int64
}

const staleAfter = 8

// DefaultBytes is the memory a store gives plain chunks by default.
const DefaultBytes = 128 << 20

// minReadBytes is what reads keep of a budget of 4*minReadBytes or more:
// twice the read-ahead (chain/readahead.go), so that a reader's window
// and the chunks concurrent readers share stay cached.
const minReadBytes = 16 << 20

// TierBytes is the share of a budget of total bytes for plain chunks that
// goes to the reference tier: 7/8, for a reference chunk that is not there
// is rebuilt through the whole delta chain, at a cost that grows with the
// chain's depth on every save, while reads only need room for read-ahead
// and for chunks that concurrent readers share; but never so much that
// reads keep less than minReadBytes of a budget that has it to spare.
func TierBytes(total int64) int64 {
	tier := total / 8 * 7
	if total >= 4*minReadBytes {
		tier = min(tier, total-minReadBytes)
	}
	return max(tier, 0)
}

// NewTier makes a tier of at most max bytes.
func NewTier(max int64) *Tier {
	return &Tier{max: max, items: map[Key][]byte{}, vers: map[meta.VersionID]*tierVersion{}}
}

// StartSave notes that family starts a save against ref (0: a baseline):
// its other versions will not be wanted again.
func (t *Tier) StartSave(family string, ref meta.VersionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	for id, v := range t.vers {
		if v.family != family {
			continue
		}
		if id == ref {
			v.gen = t.gen
		} else {
			t.dropLocked(id)
		}
	}
}

// minTierChunk is the smallest chunk the tier keeps. Rebuilding a chunk
// smaller than that costs little, and small files (thousands of them, each
// its own family) would fill the tier with entries that no later save
// wants, each making every save's bookkeeping longer.
const minTierChunk = 4 << 10

// Offer keeps v, a chunk of a version of family, if there is room (after
// evicting stale families' versions if need be); it reports whether it did.
func (t *Tier) Offer(k Key, family string, v []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.items[k]; ok {
		return false
	}
	if len(v) < minTierChunk {
		return false
	}
	for t.size+int64(cap(v)) > t.max {
		if !t.evictStaleLocked() {
			return false
		}
	}
	tv := t.vers[k.V]
	if tv == nil {
		tv = &tierVersion{family: family}
		t.vers[k.V] = tv
	}
	tv.gen = t.gen
	tv.bytes += int64(cap(v))
	t.items[k] = v
	t.size += int64(cap(v))
	return true
}

// Get returns chunk k; with take it also removes it.
func (t *Tier) Get(k Key, take bool) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.items[k]
	if !ok {
		return nil, false
	}
	t.hits++
	if take {
		delete(t.items, k)
		t.size -= int64(cap(v))
		if tv := t.vers[k.V]; tv != nil {
			if tv.bytes -= int64(cap(v)); tv.bytes <= 0 {
				delete(t.vers, k.V)
			}
		}
	}
	return v, true
}

// CopyAt copies chunk k's bytes from off into dst, under the lock: a save
// may take the chunk and recycle its buffer at any time, so readers copy
// rather than share it. It reports false when k is not in the tier.
func (t *Tier) CopyAt(k Key, dst []byte, off int64) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.items[k]
	if !ok || off >= int64(len(v)) {
		return 0, false
	}
	t.hits++
	return copy(dst, v[off:]), true
}

// Hits counts the chunks served from the tier.
func (t *Tier) Hits() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hits
}

// Has reports whether chunk k is in the tier.
func (t *Tier) Has(k Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.items[k]
	return ok
}

// DropVersion forgets a version (freed, or an abandoned save).
func (t *Tier) DropVersion(id meta.VersionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(id)
}

func (t *Tier) dropLocked(id meta.VersionID) {
	if _, ok := t.vers[id]; !ok {
		return
	}
	for k, b := range t.items {
		if k.V == id {
			delete(t.items, k)
			t.size -= int64(cap(b))
		}
	}
	delete(t.vers, id)
}

// evictStaleLocked drops the stalest version idle for staleAfter saves.
func (t *Tier) evictStaleLocked() bool {
	var victim meta.VersionID
	oldest := t.gen
	for id, v := range t.vers {
		if v.gen+staleAfter <= t.gen && v.gen <= oldest {
			victim, oldest = id, v.gen
		}
	}
	if victim == 0 {
		return false
	}
	t.dropLocked(victim)
	return true
}

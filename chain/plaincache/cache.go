// Package plaincache holds the memory for plain (decoded) chunks: the
// reference tier, which keeps the chunks the next saves will delta against,
// and an LRU cache of chunks rebuilt for reads.
package plaincache

import (
	"container/list"
	"sync"

	"github.com/ckptfs/ckptfs/meta"
)

// Key names a chunk's plain bytes: version and file offset, and the
// precision view they are of (chain/view.go; 0: the exact bytes).
type Key struct {
	V    meta.VersionID
	Off  int64
	View uint8
}

// Cache keeps recently rebuilt plain chunks, bounded in bytes, and makes
// concurrent requests for one chunk share a single rebuild. Cached slices are
// shared: callers must not modify them.
type Cache struct {
	mu       sync.Mutex
	max      int64
	size     int64
	lru      *list.List // of *cacheEntry, most recent first
	items    map[Key]*list.Element
	inflight map[Key]*cacheCall
	hits     int64
	misses   int64
}

type cacheEntry struct {
	key Key
	val []byte
}

type cacheCall struct {
	done chan struct{}
	val  []byte
	err  error
}

func NewCache(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, lru: list.New(),
		items: map[Key]*list.Element{}, inflight: map[Key]*cacheCall{}}
}

// Get returns the cached bytes of k, or runs load once for all concurrent
// callers and caches its result.
func (c *Cache) Get(k Key, load func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		v := el.Value.(*cacheEntry).val
		c.mu.Unlock()
		return v, nil
	}
	if call, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		<-call.done
		return call.val, call.err
	}
	c.misses++
	call := &cacheCall{done: make(chan struct{})}
	c.inflight[k] = call
	c.mu.Unlock()

	call.val, call.err = load()

	c.mu.Lock()
	delete(c.inflight, k)
	if call.err == nil {
		c.insertLocked(k, call.val)
	}
	c.mu.Unlock()
	close(call.done)
	return call.val, call.err
}

// Lookup returns the cached bytes of k, if they are cached, counting a hit
// or a miss as Get does; it rebuilds nothing and caches nothing.
func (c *Cache) Lookup(k Key) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		c.misses++
		return nil, false
	}
	c.lru.MoveToFront(el)
	c.hits++
	return el.Value.(*cacheEntry).val, true
}

func (c *Cache) insertLocked(k Key, v []byte) {
	if int64(len(v)) > c.max/4 {
		return // one chunk must not flush the cache
	}
	c.items[k] = c.lru.PushFront(&cacheEntry{key: k, val: v})
	c.size += int64(len(v))
	for c.size > c.max {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.items, e.key)
		c.size -= int64(len(e.val))
	}
}

// DropVersion forgets every chunk of a freed version, so a reused number
// could never read stale bytes (numbers are not reused, but be safe).
func (c *Cache) DropVersion(v meta.VersionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*cacheEntry); e.key.V == v {
			c.lru.Remove(el)
			delete(c.items, e.key)
			c.size -= int64(len(e.val))
		}
		el = next
	}
}

// Stats reports hits, misses and the bytes held.
func (c *Cache) Stats() (hits, misses, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, c.size
}

// Clear empties the cache.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	c.items = map[Key]*list.Element{}
	c.size = 0
}

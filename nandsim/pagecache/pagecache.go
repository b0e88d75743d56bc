// Package pagecache models the dirty pages of the host's page cache, which
// decide what a write costs the SSD. A process that writes a file without
// syncing it leaves the pages dirty; the kernel writes them to the device
// only when the file is synced, when its oldest dirty page is older than the
// dirty expiry (the flusher), when the dirty pages of all files pass the
// background limit (oldest files first), or when it must (unmount). Pages
// freed, trimmed or deleted before then never reach the flash, and a page
// written again while dirty is written back once.
//
// One model serves the simulated device (the pages of its backing file,
// nandsim.SSD.DeferPrograms), the shadow (the plain filesystem's files,
// chain/wear) and the staging files (fs). It holds no lock: its users
// hold theirs.
package pagecache

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/meta/extent"
	"golang.org/x/sys/unix"
)

// Run is the pages [Start, Start+Len) of a file.
type Run = extent.Extent

// Cache is the dirty pages of files named by K.
type Cache[K comparable] struct {
	expire time.Duration
	limit  int64 // pages
	now    func() time.Time

	files  map[K]*file
	pages  int64 // dirty, over files
	spared int64 // written again while dirty, or freed while dirty
}

// file is one file's dirty pages and when the first of them was dirtied,
// which the kernel's expiry counts from.
type file struct {
	dirty extent.Set
	since time.Time
}

// New returns an empty cache that writes back after expire, or when more
// than limitPages are dirty; now is the clock (time.Now outside tests).
func New[K comparable](expire time.Duration, limitPages int64, now func() time.Time) *Cache[K] {
	return &Cache[K]{expire: expire, limit: limitPages, now: now, files: map[K]*file{}}
}

// Dirty records pages e of file k as written now and reports whether the
// dirty pages now pass the background limit. Pages dirty already count
// once.
func (c *Cache[K]) Dirty(k K, e extent.Extent) (over bool) {
	return c.DirtySince(k, e, c.now())
}

// DirtySince is Dirty of pages written since t: a file with no dirty page
// yet starts its expiry at t (a staging file's content, written over time
// and told to the model at its close).
func (c *Cache[K]) DirtySince(k K, e extent.Extent, t time.Time) (over bool) {
	if e.Len <= 0 {
		return c.Over()
	}
	f := c.files[k]
	if f == nil {
		f = &file{since: t}
		c.files[k] = f
	}
	before := f.dirty.Pages()
	c.spared += f.dirty.Add(e)
	c.pages += f.dirty.Pages() - before
	return c.Over()
}

// Clean drops pages e of file k from the dirty set: freed, trimmed or
// deleted before the host wrote them.
func (c *Cache[K]) Clean(k K, e extent.Extent) {
	f := c.files[k]
	if f == nil {
		return
	}
	removed := f.dirty.Remove(e)
	c.pages -= removed
	c.spared += removed
	c.forgetIfClean(k, f)
}

func (c *Cache[K]) forgetIfClean(k K, f *file) {
	if f.dirty.Pages() == 0 {
		delete(c.files, k)
	}
}

// Over reports whether the dirty pages pass the background limit.
func (c *Cache[K]) Over() bool { return c.pages > c.limit }

// Due reports whether file k's oldest dirty page is past the expiry.
func (c *Cache[K]) Due(k K) bool {
	f := c.files[k]
	return f != nil && c.now().Sub(f.since) >= c.expire
}

// Renew starts a new expiry period for file k's dirty pages (a write-back
// of it is under way: what is dirtied meanwhile waits for the next).
func (c *Cache[K]) Renew(k K) {
	if f := c.files[k]; f != nil {
		f.since = c.now()
	}
}

// Take writes back file k: it returns its dirty pages, clean now.
func (c *Cache[K]) Take(k K) []extent.Extent {
	f := c.files[k]
	if f == nil {
		return nil
	}
	delete(c.files, k)
	c.pages -= f.dirty.Pages()
	return f.dirty.Extents()
}

// TakeFirst writes back the lowest run of file k's dirty pages, at most
// most of them, and returns it (ok false: none dirty).
func (c *Cache[K]) TakeFirst(k K, most int64) (e extent.Extent, ok bool) {
	f := c.files[k]
	if f == nil || most <= 0 {
		return extent.Extent{}, false
	}
	first := f.dirty.Extents()[0]
	e = extent.Extent{Start: first.Start, Len: min(first.Len, most)}
	c.pages -= f.dirty.Remove(e)
	c.forgetIfClean(k, f)
	return e, true
}

// TakeDue writes back every file whose oldest dirty page is past the
// expiry (the flusher's pass) and returns their pages, file by file.
func (c *Cache[K]) TakeDue() [][]extent.Extent {
	now := c.now()
	return c.takeIf(func(f *file) bool { return now.Sub(f.since) >= c.expire })
}

// TakeAll writes back every dirty page (sync, unmount), file by file.
func (c *Cache[K]) TakeAll() [][]extent.Extent {
	return c.takeIf(func(*file) bool { return true })
}

func (c *Cache[K]) takeIf(pick func(f *file) bool) [][]extent.Extent {
	var out [][]extent.Extent
	for k, f := range c.files {
		if pick(f) {
			out = append(out, f.dirty.Extents())
			c.pages -= f.dirty.Pages()
			delete(c.files, k)
		}
	}
	return out
}

// TakeOldest writes back the file dirty the longest if the dirty pages
// pass the background limit, and returns it and its pages (ok false: under
// the limit).
func (c *Cache[K]) TakeOldest() (k K, pages []extent.Extent, ok bool) {
	if !c.Over() {
		return k, nil, false
	}
	var oldest K
	var of *file
	for k, f := range c.files {
		if of == nil || f.since.Before(of.since) {
			oldest, of = k, f
		}
	}
	if of == nil {
		return k, nil, false
	}
	return oldest, c.Take(oldest), true
}

// Pages is the number of dirty pages.
func (c *Cache[K]) Pages() int64 { return c.pages }

// Spared is the number of page writes the cache absorbed: pages written
// again while dirty, and pages freed while dirty.
func (c *Cache[K]) Spared() int64 { return c.spared }

// Forget drops file k from the model, dirty or not: deleted, or its pages
// accounted elsewhere from now on. Its dirty pages count as spared.
func (c *Cache[K]) Forget(k K) {
	if f := c.files[k]; f != nil {
		c.pages -= f.dirty.Pages()
		c.spared += f.dirty.Pages()
		delete(c.files, k)
	}
}

// HostSettings are this host's dirty expiry and background limit
// (/proc/sys/vm), with the kernel's defaults where they cannot be read.
func HostSettings() (expire time.Duration, limitBytes int64) {
	expire = 30 * time.Second
	if cs, ok := readSysctl("dirty_expire_centisecs"); ok && cs > 0 {
		expire = time.Duration(cs) * 10 * time.Millisecond
	}
	if b, ok := readSysctl("dirty_background_bytes"); ok && b > 0 {
		return expire, b
	}
	ratio := int64(10)
	if r, ok := readSysctl("dirty_background_ratio"); ok && r > 0 {
		ratio = r
	}
	return expire, physicalMemory() * ratio / 100
}

func readSysctl(name string) (int64, bool) {
	b, err := os.ReadFile("/proc/sys/vm/" + name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

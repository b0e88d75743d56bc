package fs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// go-fuse (v2.12) counts the handles of an inode that use its registered
// backing file, and its Release uncounts every handle released while the
// inode has one, passthrough or not. So a handle served through the page
// cache, released just as a passthrough handle of the same inode opened
// (our count of the cached handles had already dropped, letting it be one),
// unregistered the backing file that handle uses; the next passthrough open
// registered another, which the kernel refuses with EIO while the first is
// attached to the inode (fstests generic/451: readers and an O_DIRECT
// writer opening one file in turn). A handle's release is therefore
// accounted (chooseMode's counts, the last writer's commit) only once
// go-fuse has finished releasing it: until then a new open sees the handle
// still open and joins its mode.

// releaseOrder is the raw filesystem go-fuse serves, with work to do after
// a release.
type releaseOrder struct {
	fuse.RawFileSystem
	after sync.Map // the release request's cancel channel → func()
}

// Release releases the handle, then runs what the handle's release left
// for after it.
func (r *releaseOrder) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	r.RawFileSystem.Release(cancel, in)
	if fn, ok := r.after.LoadAndDelete(cancel); ok {
		fn.(func())()
	}
}

// afterRelease runs fn once go-fuse has released the handle whose release
// ctx serves; at once outside a release request (or without a mount).
func (r *releaseOrder) afterRelease(ctx context.Context, fn func()) {
	if r != nil {
		if c, ok := ctx.(*fuse.Context); ok && c.Cancel != nil {
			if _, dup := r.after.LoadOrStore(c.Cancel, fn); !dup {
				return
			}
		}
	}
	fn()
}

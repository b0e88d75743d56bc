package chain

import (
	"sync/atomic"

	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/meta"
)

// readAheadBytes is how far past their furthest reads all streaming readers
// together have chunks rebuilt ahead, by up to Options.Workers goroutines
// in all (a rebuild is CPU-bound: more at once would only hold more chunks
// in memory, and 24 readers at once held 90 MB of rebuilds). The rebuilt chunks wait in the read cache (what
// plaincache.TierBytes leaves of the store's plain-chunk memory, 16 MiB by
// default), so the windows must leave room in it: chunks evicted before
// they are read would be rebuilt twice.
var readAheadBytes int64 = 8 << 20

// readingAhead counts the readers whose read-ahead is running: they share
// readAheadBytes.
var readingAhead atomic.Int64

// readAheadWindow is one streaming reader's share of readAheadBytes.
func readAheadWindow() int64 {
	return readAheadBytes / max(1, readingAhead.Load())
}

// readAheadStart is the first window of a stream. Each read that streams
// doubles the window up to the reader's share of readAheadBytes, as the
// kernel's read-ahead grows: a program that reads a file's header and
// stops (a listing, safe_open before it maps the tensors it wants) costs
// one chunk's rebuild ahead, not a window's.
const readAheadStart = 256 << 10

// readAheadState is a Reader's read-ahead, under Reader.mu.
type readAheadState struct {
	ahead   int64 // end of the chunks started
	want    int64 // rebuild chunks that start below this
	window  int64 // how far past the furthest read; 0 until reads stream
	running int   // goroutines rebuilding
}

// readAhead notes a read of [start, end) before it is served and, when
// reads stream, widens the window and starts rebuilding the chunks from
// start to the window past the furthest read, so the chunks of this read after its first one
// and those of the reads to come rebuild in parallel. The kernel sends the
// requests of its read-ahead window concurrently and so out of order: a
// read that starts within a window of the furthest one still streams.
func (r *Reader) readAhead(start, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	streaming := start >= r.lastEnd-readAheadBytes && start <= r.lastEnd+readAheadBytes
	if !streaming {
		r.lastEnd = end
		r.ra.ahead, r.ra.want, r.ra.window = end, end, 0 // running goroutines stop
		return
	}
	r.ra.window = min(readAheadWindow(), max(2*r.ra.window, 2*(end-start), readAheadStart))
	r.lastEnd = max(r.lastEnd, end)
	r.ra.ahead = max(r.ra.ahead, start)
	r.ra.want = max(r.ra.want, min(r.size, r.lastEnd+r.ra.window))
	for r.ra.running < r.s.workers && r.ra.ahead < r.ra.want && !r.s.closing.Load() && r.s.takeAheadSlot() {
		if r.ra.running == 0 {
			readingAhead.Add(1)
		}
		r.ra.running++
		r.s.ahead.Add(1)
		go r.rebuildAhead()
	}
}

// rebuildAhead rebuilds the chunks of the window into the cache, one at a
// time, until the window is done. A chunk that fails is left for the read
// that needs it to report.
func (r *Reader) rebuildAhead() {
	defer r.s.ahead.Done()
	defer r.s.aheadRunning.Add(-1)
	for {
		c, ok := r.nextAhead()
		if !ok {
			return
		}
		// No pin: a chunk of a version freed meanwhile fails its checksum
		// and is dropped, and the free is not put off for chunks nobody
		// will read.
		_, _ = r.chunkOf(c.Offset)
	}
}

// takeAheadSlot reserves one of the store's workers read-ahead goroutines,
// or reports that all run: the reads then rebuild their own chunks.
func (s *Store) takeAheadSlot() bool {
	for {
		n := s.aheadRunning.Load()
		if n >= int64(s.workers) {
			return false
		}
		if s.aheadRunning.CompareAndSwap(n, n+1) {
			for p := s.aheadPeak.Load(); n+1 > p && !s.aheadPeak.CompareAndSwap(p, n+1); p = s.aheadPeak.Load() {
			}
			return true
		}
	}
}

// nextAhead claims the next chunk of the window that needs rebuilding.
func (r *Reader) nextAhead() (meta.Chunk, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.ra.ahead < r.ra.want && !r.s.closing.Load() {
		c, err := r.chunkForLocked(r.ra.ahead)
		if err != nil {
			break
		}
		r.ra.ahead = c.End()
		if !c.Zeros() && (r.view != exact || !r.s.refs.Has(plaincache.Key{V: r.id, Off: c.Offset})) {
			return c, true
		}
	}
	r.ra.running--
	if r.ra.running == 0 {
		readingAhead.Add(-1)
	}
	return meta.Chunk{}, false
}

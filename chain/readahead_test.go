package chain

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// deepSeries saves n versions of a 2 MiB .npy checkpoint under names of one
// family, progressive, so that version k is at depth k, and returns the
// store, the files' contents and their versions.
func deepSeries(t testing.TB, n int) (*DirStore, [][]byte, []meta.VersionID) {
	t.Helper()
	p := policy.Default()
	p.SnapDis = n + 1
	return deepSeriesIn(t, openTestStore(t, "", p), n, 512<<10)
}

// deepSeriesIn is deepSeries into ds (whose policy must allow the chain)
// with saves of elems float32 values.
func deepSeriesIn(t testing.TB, ds *DirStore, n, elems int) (*DirStore, [][]byte, []meta.VersionID) {
	t.Helper()
	var files [][]byte
	var ids []meta.VersionID
	for i, w := range ckpttest.TrainingSeries(3, elems, n) {
		data := ckpttest.NpyFile(w)
		ino := writeFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i), data, 1<<20)
		info, err := ds.Info(ino)
		if err != nil {
			t.Fatal(err)
		}
		if int(info.Depth) != i {
			t.Fatalf("save %d at depth %d", i, info.Depth)
		}
		files, ids = append(files, data), append(ids, info.Version)
	}
	return ds, files, ids
}

// contentChunks counts the chunks of a version that a read rebuilds.
func contentChunks(t *testing.T, r *Reader) int {
	t.Helper()
	n := 0
	for off := int64(0); off < r.Size(); {
		c, err := r.chunkFor(off)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Zeros() {
			n++
		}
		off = c.End()
	}
	return n
}

// A sequential read of a version at depth 3, in the kernel's 128 KiB
// requests, rebuilds each of its chunks once (read-ahead and the reads
// share one rebuild), and the chunks of the versions below it, decoded on
// the way, stay out of the cache.
func TestSequentialReadRebuildsEachChunkOnce(t *testing.T) {
	defer func(w int64) { readAheadBytes = w }(readAheadBytes)
	readAheadBytes = 512 << 10 // half the test store's 1 MiB read cache
	ds, files, ids := deepSeries(t, 5)
	defer ds.Close()
	ds.DropCaches()
	r, err := ds.OpenVersion(ids[3])
	if err != nil {
		t.Fatal(err)
	}
	chunks := contentChunks(t, r)
	got := make([]byte, 0, r.Size())
	buf := make([]byte, 128<<10)
	for off := int64(0); ; {
		n, err := r.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, files[3]) {
		t.Fatal("read back differs")
	}
	_, misses, size := ds.cache.Stats()
	if misses != int64(chunks) {
		t.Fatalf("%d rebuilds for %d chunks", misses, chunks)
	}
	if size > 1<<20 {
		t.Fatalf("read cache holds %d bytes", size)
	}
}

// Concurrent reads out of order, as the kernel's read-ahead and a mapping's
// page faults send them, return the bytes written, at every depth.
func TestConcurrentOutOfOrderReads(t *testing.T) {
	ds, files, ids := deepSeries(t, 5)
	defer ds.Close()
	for i, id := range ids {
		ds.DropCaches()
		r, err := ds.OpenVersion(id)
		if err != nil {
			t.Fatal(err)
		}
		want := files[i]
		const piece = 96 << 10 // not a divisor of a chunk
		offs := rand.New(rand.NewSource(int64(i))).Perm((len(want) + piece - 1) / piece)
		got := make([]byte, len(want))
		var wg sync.WaitGroup
		errs := make(chan error, len(offs))
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < len(offs); j += 4 {
					off := offs[j] * piece
					end := min(len(want), off+piece)
					if _, err := r.ReadAt(got[off:end], int64(off)); err != nil && err != io.EOF {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("depth %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("depth %d: read back differs", i)
		}
	}
}

// Streaming readers share one read-ahead budget, and a reader whose window
// is done gives its share back.
func TestReadersShareReadAhead(t *testing.T) {
	ds, files, ids := deepSeries(t, 3)
	defer ds.Close()
	before := readingAhead.Load()
	var wg sync.WaitGroup
	for i, id := range ids {
		r, err := ds.OpenVersion(id)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]byte, len(files[i]))
			for off := 0; off < len(got); off += 128 << 10 {
				if _, err := r.ReadAt(got[off:min(len(got), off+128<<10)], int64(off)); err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				if n := readingAhead.Load() - before; n > int64(len(ids)) || readAheadWindow() < readAheadBytes/int64(len(ids)) {
					t.Errorf("%d readers reading ahead, window %d", n, readAheadWindow())
				}
			}
			if !bytes.Equal(got, files[i]) {
				t.Errorf("depth %d: read back differs", i)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for readingAhead.Load() != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d readers still counted as reading ahead after all reads", readingAhead.Load()-before)
		}
		time.Sleep(time.Millisecond)
	}
	if readAheadWindow() != readAheadBytes {
		t.Fatalf("window %d with no reader, want %d", readAheadWindow(), readAheadBytes)
	}
}

// A read of a file's first bytes (a header) rebuilds its chunk and at most
// the next, not a whole window.
func TestHeaderReadRebuildsLittle(t *testing.T) {
	ds, _, ids := deepSeries(t, 5)
	defer ds.Close()
	ds.DropCaches()
	r, err := ds.OpenVersion(ids[3]) // not the newest: not in the tier
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		running := r.ra.running
		r.mu.Unlock()
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("read-ahead still running")
		}
		time.Sleep(time.Millisecond)
	}
	if _, misses, _ := ds.cache.Stats(); misses > 3 {
		t.Fatalf("a 4 KiB read at 0 rebuilt %d chunks", misses)
	}
}

// TestReadAheadBoundedAcrossReaders: many readers streaming at once run
// at most Workers read-ahead goroutines in all, not Workers each: each
// holds a chunk's rebuild, and more than the cores only hold more memory.
func TestReadAheadBoundedAcrossReaders(t *testing.T) {
	p := policy.Default()
	ds, err := OpenDir(t.TempDir(), DirOptions{Options: Options{Policy: p, CacheBytes: 8 << 20, Workers: 2}, Device: nandsim.SmallConfig(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	const readers = 8
	var ids []meta.VersionID
	var files [][]byte
	for k, w := range ckpttest.TrainingSeries(7, 1<<20, readers) {
		data := ckpttest.NpyFile(w)
		ino := writeFile(t, ds.Store, fmt.Sprintf("rank-%d.npy", k), data, 1<<20)
		info, err := ds.Info(ino)
		if err != nil {
			t.Fatal(err)
		}
		ids, files = append(ids, info.Version), append(files, data)
	}
	ds.DropCaches()
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for k := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ds.OpenVersion(ids[k])
			if err != nil {
				errs <- err
				return
			}
			r.SkipTier()
			got := make([]byte, r.Size())
			for off := 0; off < len(got); off += 128 << 10 {
				if _, err := r.ReadAt(got[off:min(len(got), off+128<<10)], int64(off)); err != nil && err != io.EOF {
					errs <- err
					return
				}
			}
			if !bytes.Equal(got, files[k]) {
				errs <- fmt.Errorf("rank-%d.npy read back wrong", k)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak := ds.aheadPeak.Load(); peak < 1 || peak > 2 {
		t.Fatalf("%d read-ahead goroutines ran at once for %d readers, want 1 to Workers (2)", peak, readers)
	}
}

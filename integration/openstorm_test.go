package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestOpenReleaseStorm is fstests generic/451's pattern: a writer saves a
// file again and again with O_DIRECT and reads each save back, buffered
// and with O_DIRECT, while two readers open the same file read-write, read
// it and close it as fast as they can. Every open must succeed and every
// read back return the save just made. It found four races, each of which
// failed it within seconds here: an open failed with EIO (go-fuse uncounted
// the backing file of a handle served through the page cache,
// releaseorder.go); a read returned the save before (the reader of the
// committed version that the inode's handles share outlived a commit); a
// release counted itself the last writer while a writer was opening, and
// committed the staging file under it; and the state of the inode left the
// open table between the last writer's release and its commit's hold, so a
// concurrent open made a second one, whose writer's bytes the commit of
// the first then lost (an open failed with ENOENT, or a read returned
// zeros). Both save modes.
func TestOpenReleaseStorm(t *testing.T) {
	const size = 655360
	run := 10 * time.Second
	if full() {
		run = 30 * time.Second
	}
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		m := newMount(t, flags...)
		path := filepath.Join(m.dir, "tst")
		var stop atomic.Bool
		var wg sync.WaitGroup
		readerErr := make(chan error, 2)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, size)
				for !stop.Load() {
					f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
					if err != nil {
						readerErr <- fmt.Errorf("reader's open: %w", err)
						return
					}
					f.ReadAt(buf, 0)
					if err := f.Close(); err != nil {
						readerErr <- fmt.Errorf("reader's close: %w", err)
						return
					}
				}
			}()
		}
		defer func() {
			stop.Store(true)
			wg.Wait()
		}()
		pattern := [2][]byte{alignedBuffer(t, size), alignedBuffer(t, size)}
		for i := range size {
			pattern[0][i], pattern[1][i] = 0x55, 0xaa
		}
		got := alignedBuffer(t, size)
		deadline := time.Now().Add(run)
		cycles := 0
		for ; time.Now().Before(deadline); cycles++ {
			want := pattern[cycles%2]
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_DIRECT, 0o600)
			if err != nil {
				t.Fatalf("cycle %d: open O_DIRECT for writing: %v", cycles, err)
			}
			if _, err := f.WriteAt(want, 0); err != nil {
				t.Fatalf("cycle %d: O_DIRECT write: %v", cycles, err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("cycle %d: close: %v", cycles, err)
			}
			for _, flags := range []int{os.O_RDONLY, os.O_RDONLY | syscall.O_DIRECT} {
				f, err := os.OpenFile(path, flags, 0)
				if err != nil {
					t.Fatalf("cycle %d: open %#x: %v", cycles, flags, err)
				}
				n, err := f.ReadAt(got, 0)
				f.Close()
				if n != size || !bytes.Equal(got, want) {
					t.Fatalf("cycle %d: read back with flags %#x: %d bytes (%v), first byte %#x, want %#x", cycles, flags, n, err, got[0], want[0])
				}
			}
			select {
			case err := <-readerErr:
				t.Fatalf("cycle %d: %v", cycles, err)
			default:
			}
		}
		stop.Store(true)
		wg.Wait()
		select {
		case err := <-readerErr:
			t.Fatal(err)
		default:
		}
		t.Logf("%d cycles", cycles)
		m.stop()
		fsck(t, m.store)
	})
}

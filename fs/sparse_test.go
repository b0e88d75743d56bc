package fs

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRewriteOfHugeSparseFile is fstests generic/308: a page written at
// 16 TiB less two pages and fsynced, then the file opened again, written
// at the last page before 16 TiB (refused: EFBIG) and fsynced. Each
// release checks whether the staging file changed since its commit at
// fsync; that check read every byte of the 16 TiB hole (hours).
func TestRewriteOfHugeSparseFile(t *testing.T) {
	for _, daemonWritten := range []bool{false, true} {
		m := newTestMountMode(t, nil, daemonWritten)
		name := m.path("f")
		page := make([]byte, 4096)
		done := make(chan error, 1)
		go func() {
			for i, off := range []int64{(1<<32 - 2) * 4096, (1<<32 - 1) * 4096} {
				f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					done <- err
					return
				}
				_, werr := f.WriteAt(page, off)
				if i == 0 && werr != nil {
					done <- werr
					return
				}
				if err := f.Sync(); err != nil {
					done <- err
					return
				}
				if err := f.Close(); err != nil {
					done <- err
					return
				}
			}
			m.fsys.Drain()
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute): // what it took was hours
			t.Fatal("writing and syncing a 16 TiB sparse file twice did not end")
		}
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil || st.Size != (1<<32-1)*4096 {
			t.Errorf("size %d, %v; want %d", st.Size, err, (1<<32-1)*4096)
		}
	}
}

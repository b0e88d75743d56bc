package chain

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
)

// TestWriteBackBounded: writers queue what they accept, all of them
// together within WriteBackBytes; a full budget makes writes wait for the
// feeders, never fail; every byte is committed.
func TestWriteBackBounded(t *testing.T) {
	const limit, piece = 256 << 10, 32 << 10
	for _, wb := range []int64{limit, -1} {
		t.Run(fmt.Sprintf("limit=%d", wb), func(t *testing.T) {
			ds, err := OpenDir(t.TempDir(), DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20,
				WriteBackBytes: wb}, Device: smallDevice(), NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			s := ds.Store
			datas := make([][]byte, 3)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var peak int64
			for i := range datas {
				datas[i] = randomBytes(rand.New(rand.NewSource(int64(i))), 2<<20)
				ino := createFile(t, s, fmt.Sprintf("f%d", i))
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					w, err := s.NewWriter(ino, pathIs(fmt.Sprintf("f%d", i)), true)
					if err != nil {
						t.Error(err)
						return
					}
					for off := 0; off < len(datas[i]); off += piece {
						if _, err := w.WriteAt(datas[i][off:off+piece], int64(off), 1); err != nil {
							t.Errorf("write %d at %d: %v", i, off, err)
							return
						}
						q := s.QueuedBytes()
						mu.Lock()
						peak = max(peak, q)
						mu.Unlock()
					}
					if err := w.Commit(); err != nil {
						t.Error(err)
					}
				}(i)
			}
			wg.Wait()
			if wb < 0 && peak != 0 {
				t.Errorf("without write-back %d bytes were queued", peak)
			}
			if wb > 0 && peak == 0 {
				t.Error("nothing was ever queued: writes waited for their ingest")
			}
			if wb > 0 && peak > wb+piece {
				t.Errorf("queued bytes peaked at %d, bound %d", peak, wb)
			}
			if q := s.QueuedBytes(); q != 0 {
				t.Errorf("%d bytes still queued after the commits", q)
			}
			for i, want := range datas {
				if got := readFile(t, s, fmt.Sprintf("f%d", i)); !bytes.Equal(got, want) {
					t.Errorf("f%d reads back different bytes", i)
				}
			}
			mustCheck(t, s, true)
		})
	}
}

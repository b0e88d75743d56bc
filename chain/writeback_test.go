package chain

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
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

// TestReferenceWaitsForCommitInBackground: a save that chooses its
// reference while its family's previous save is still committing in the
// background waits for that commit and is coded against it; it found no
// reference and stored a baseline. (Without write-back, so that the choice
// happens inside the write, which the test sees wait.)
func TestReferenceWaitsForCommitInBackground(t *testing.T) {
	for _, tc := range []struct {
		names  [2]string
		reason string
	}{
		{[2]string{"ckpt-0.safetensors", "ckpt-1.safetensors"}, meta.RefFamily},
		// torch.save of the same state to ckpt_N.pt, then to last.pt.
		{[2]string{"ckpt-0.safetensors", "last.safetensors"}, meta.RefLayout},
	} {
		t.Run(tc.reason, func(t *testing.T) { referenceWaits(t, tc.names, tc.reason) })
	}
}

func referenceWaits(t *testing.T, names [2]string, reason string) {
	ds, err := OpenDir(t.TempDir(), DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20,
		WriteBackBytes: -1}, Device: smallDevice(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	s := ds.Store
	series := modelSeries(7, []string{"w", "m"}, 200_000, 2)
	writers := make([]*Writer, 2)
	inos := make([]Ino, 2)
	for i := range series {
		name := names[i]
		inos[i] = createFile(t, s, name)
		if writers[i], err = s.NewWriter(inos[i], pathIs(name), true); err != nil {
			t.Fatal(err)
		}
	}
	writeAll := func(i int) error {
		for off := 0; off < len(series[i]); off += 1 << 20 {
			if _, err := writers[i].WriteAt(series[i][off:min(len(series[i]), off+1<<20)], int64(off), 1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := writeAll(0); err != nil {
		t.Fatal(err)
	}
	writers[0].mu.Lock() // the first commit is under way and cannot land yet
	firstDone := writers[0].CommitInBackground()
	secondWritten := make(chan error, 1)
	go func() { secondWritten <- writeAll(1) }()
	select {
	case err := <-secondWritten:
		writers[0].mu.Unlock()
		t.Fatalf("the second save chose its reference while the first was committing (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	writers[0].mu.Unlock()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondWritten; err != nil {
		t.Fatal(err)
	}
	if err := writers[1].Commit(); err != nil {
		t.Fatal(err)
	}
	first, second := info(t, s, inos[0]), info(t, s, inos[1])
	if second.Reference != first.Version || second.RefReason != reason {
		t.Errorf("second save: reference %d (%s), want the first save %d (%s)", second.Reference, second.RefReason, first.Version, reason)
	}
	for i, data := range series {
		if got := readIno(t, s, inos[i]); !bytes.Equal(got, data) {
			t.Errorf("save %d reads back different bytes", i)
		}
	}
}

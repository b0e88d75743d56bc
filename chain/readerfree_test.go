package chain

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"sync"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// TestReaderOfReplacedVersion: a reader whose version a newer commit freed
// answers ErrNotFound (the filesystem then reads the file's new version),
// never a corrupt manifest: fsstress's reads of a file whose commit landed
// meanwhile failed with EIO ("no chunk covers offset").
func TestReaderOfReplacedVersion(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	rng := rand.New(rand.NewSource(1))
	old := make([]byte, 3<<20)
	rng.Read(old)
	writeFile(t, s, "f", old, 1<<20)
	n, err := s.Names().Lookup(meta.RootIno, "f")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenVersion(n.Version)
	if err != nil {
		t.Fatal(err)
	}
	fresh := make([]byte, 2<<20)
	rng.Read(fresh)
	writeFile(t, s, "f", fresh, 1<<20)
	buf := make([]byte, 4096)
	if _, err := r.ReadAt(buf, 2<<20); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a freed version: %v, want ErrNotFound", err)
	}
	if _, err := r.SeekExtent(2<<20, true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("seek in a freed version: %v, want ErrNotFound", err)
	}
	if got := readFile(t, s, "f"); !bytes.Equal(got, fresh) {
		t.Fatal("the new version reads wrong")
	}
}

// TestReadsRaceCommits: readers of a file that commits keep landing on read
// either their version's bytes, whole, or ErrNotFound, and a read that
// started is never cut short by the free of its version.
func TestReadsRaceCommits(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	const size = 1 << 20
	contents := map[meta.VersionID][]byte{}
	var mu sync.Mutex
	save := func(seed int64) {
		data := make([]byte, size)
		rand.New(rand.NewSource(seed)).Read(data)
		writeFile(t, s, "f", data, 256<<10)
		n, err := s.Names().Lookup(meta.RootIno, "f")
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		contents[n.Version] = data
		mu.Unlock()
	}
	save(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			buf := make([]byte, 300<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := s.Names().Lookup(meta.RootIno, "f")
				if err != nil {
					t.Error(err)
					return
				}
				r, err := s.OpenVersion(n.Version)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want := contents[n.Version]
				mu.Unlock()
				for i := 0; i < 4; i++ {
					off := rng.Int63n(size)
					k, err := r.ReadAt(buf, off)
					if errors.Is(err, ErrNotFound) {
						break
					}
					if err != nil && err != io.EOF {
						t.Errorf("read version %d at %d: %v", n.Version, off, err)
						return
					}
					if want != nil && !bytes.Equal(buf[:k], want[off:off+int64(k)]) {
						t.Errorf("read version %d at %d: wrong bytes", n.Version, off)
						return
					}
				}
			}
		}(w)
	}
	for i := int64(1); i < 40 && !t.Failed(); i++ {
		save(i)
	}
	close(stop)
	wg.Wait()
	mustCheck(t, s, true)
}

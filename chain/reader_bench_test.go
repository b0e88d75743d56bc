package chain

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// BenchmarkColdRead reads a 2 MiB checkpoint at each chain depth in 1 MiB
// calls, as the kernel's read-ahead asks, with the read cache emptied
// first: the decode cost of the chain, spread over the workers.
func BenchmarkColdRead(b *testing.B) {
	ds, files, ids := deepSeries(b, 7)
	defer ds.Close()
	coldReads(b, ds, files, ids, false, ds.OpenVersion)
}

// BenchmarkColdReadLarge is BenchmarkColdRead on a 64 MiB checkpoint at
// depths 0 to 3: long enough for the read-ahead window to reach its full
// width, as in a restore of a real checkpoint; the device file is dropped
// from the page cache too.
func BenchmarkColdReadLarge(b *testing.B) {
	ds, files, ids := largeSeriesStore(b, encode.DefaultCodec)
	defer ds.Close()
	coldReads(b, ds, files, ids, true, ds.OpenVersion)
}

// BenchmarkViewColdRead is BenchmarkColdReadLarge's read of each depth,
// exact and through the bfloat16 view, in a store of the default codec
// and one of split16 (issue 51: a view reads from the high planes alone).
func BenchmarkViewColdRead(b *testing.B) {
	for _, c := range []encode.Codec{encode.DefaultCodec, encode.Split16} {
		ds, files, ids := largeSeriesStore(b, c)
		b.Run(c.String()+"/exact", func(b *testing.B) { coldReads(b, ds, files, ids, true, ds.OpenVersion) })
		b.Run(c.String()+"/view", func(b *testing.B) { coldReads(b, ds, files, ids, true, ds.OpenView) })
		ds.Close()
	}
}

// largeSeriesStore is a store of codec c on a 1 GiB simulated SSD, with a
// mount's default read cache, holding 5 saves of 16 MiB at depths 0 to 4.
func largeSeriesStore(b *testing.B, c encode.Codec) (*DirStore, [][]byte, []meta.VersionID) {
	p := policy.Default()
	p.SnapDis, p.Codec = 6, c
	dev, err := nandsim.ConfigForSize(nandsim.SmallConfig(), 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	ds, err := OpenDir(b.TempDir(), DirOptions{Options: Options{Policy: p, CacheBytes: 64 << 20}, Device: dev, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	return deepSeriesIn(b, ds, 5, 16<<20)
}

// coldReads reads each save but the newest in 1 MiB calls, the read cache
// emptied first (and with evict, the store's files dropped from the page
// cache).
func coldReads(b *testing.B, ds *DirStore, files [][]byte, ids []meta.VersionID, evict bool, open func(meta.VersionID) (*Reader, error)) {
	buf := make([]byte, 1<<20)
	for depth := 0; depth < len(ids)-1; depth++ { // the newest is in the tier
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			b.SetBytes(int64(len(files[depth])))
			for b.Loop() {
				ds.DropCaches()
				if evict {
					evictDir(ds.Medium.Dir)
				}
				r, err := open(ids[depth])
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); ; {
					n, err := r.ReadAt(buf, off)
					off += int64(n)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// evictDir writes back and drops the page cache of the files in dir (the
// store's device file): a restore after a restart finds none of it there.
func evictDir(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		f.Sync()
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}

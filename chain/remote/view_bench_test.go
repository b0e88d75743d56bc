package remote

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// linkBucket models the link to a remote bucket: each ranged read waits
// for its first byte (latency) after its bytes have crossed a link of
// bytesPerSecond shared by all reads. It models a server on another
// machine, which the tests' S3 server on this one is not: that one
// competes with the daemon for its cores.
type linkBucket struct {
	bucket.Bucket
	latency        time.Duration
	bytesPerSecond float64

	mu   sync.Mutex
	free time.Time // when the link is next idle
}

func (l *linkBucket) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	l.mu.Lock()
	start := time.Now()
	if start.Before(l.free) {
		start = l.free
	}
	l.free = start.Add(time.Duration(float64(len(p)) / l.bytesPerSecond * float64(time.Second)))
	done := l.free.Add(l.latency)
	l.mu.Unlock()
	time.Sleep(time.Until(done))
	return l.Bucket.ReadAt(ctx, key, p, off)
}

// BenchmarkReplicaViewLink reads a split16 checkpoint at chain depth 3
// whole from a fresh replica, exact and through its bf16 view, over two
// modelled links: a LAN (1 ms, 1 GB/s) and a WAN (20 ms, 100 MB/s). It
// reports MB/s of the file and the bytes and ranged reads each read
// fetched.
func BenchmarkReplicaViewLink(b *testing.B) {
	p := policy.Default()
	p.Codec = encode.Split16
	s, dir := testStorePolicy(b, p)
	const name = "ckpt-3.npy"
	var size int64
	for i, w := range ckpttest.TrainingSeries(9, 4_000_000, 5) {
		data := ckpttest.NpyFile(w)
		writeFile(b, s, fmt.Sprintf("ckpt-%d.npy", i), data)
		if i == 3 {
			size = int64(len(data))
		}
	}
	mem := bucket.NewMemory()
	push(b, s, dir, mem, Options{})
	links := []struct {
		name    string
		latency time.Duration
		bps     float64
	}{{"lan", time.Millisecond, 1e9}, {"wan", 20 * time.Millisecond, 100e6}}
	for _, link := range links {
		for _, view := range []bool{false, true} {
			what := "exact"
			if view {
				what = "view"
			}
			b.Run(link.name+"/"+what, func(b *testing.B) {
				b.SetBytes(size)
				var fetched, gets int64
				for range b.N {
					lb := &linkBucket{Bucket: mem, latency: link.latency, bytesPerSecond: link.bps}
					r, err := OpenReplica(context.Background(), b.TempDir(), lb, chain.Options{Policy: policy.Default(), CacheBytes: 16 << 20}, CutOptions{})
					if err != nil {
						b.Fatal(err)
					}
					n, err := r.Store.Names().Lookup(meta.RootIno, name)
					if err != nil {
						b.Fatal(err)
					}
					open := r.Store.OpenVersion
					if view {
						open = r.Store.OpenView
					}
					rd, err := open(n.Version)
					if err != nil {
						b.Fatal(err)
					}
					buf := make([]byte, 1<<20)
					for off := int64(0); off < rd.Size(); off += int64(len(buf)) {
						if _, err := rd.ReadAt(buf, off); err != nil && err != io.EOF {
							b.Fatal(err)
						}
					}
					st := r.Stats()
					fetched, gets = fetched+st.BytesFetched, gets+st.Fetches
					r.Close()
				}
				b.ReportMetric(float64(fetched)/float64(b.N), "fetched-B/op")
				b.ReportMetric(float64(gets)/float64(b.N), "gets/op")
			})
		}
	}
}

package chain

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// BenchmarkCommitFile commits staged 64 MiB .npy saves of drifting float32
// weights, as the store does after a save's last close, each against the
// one before. With the stored codec the encoders cost next to nothing and
// the figure is the commit's own path (reading the staging file, labelling
// and chunking it, writing the pack), which runs on one core and bounds a
// commit on a machine with many.
func BenchmarkCommitFile(b *testing.B) {
	series := ckpttest.TrainingSeries(5, 16<<20, 4)
	files := make([][]byte, len(series))
	for i, w := range series {
		files[i] = ckpttest.NpyFile(w)
	}
	for _, name := range []string{"stored", "scaled"} {
		b.Run(name, func(b *testing.B) {
			codec, err := encode.ParseCodec(name)
			if err != nil {
				b.Fatal(err)
			}
			p := policy.Default()
			p.Codec = codec
			cfg, err := nandsim.ConfigForSize(nandsim.SmallConfig(), 1<<30)
			if err != nil {
				b.Fatal(err)
			}
			ds, err := OpenDir(b.TempDir(), DirOptions{Options: Options{Policy: p, CacheBytes: 256 << 20}, Device: cfg, NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			staged := make([]*os.File, len(files))
			for i, data := range files {
				staged[i] = stagedFile(b, int64(len(data)), map[int64][]byte{0: data})
			}
			b.SetBytes(int64(len(files[0])))
			for i := 0; b.Loop(); i++ {
				name := fmt.Sprintf("ckpt-%d.npy", i)
				n, err := ds.Names().Create(meta.RootIno, name, NewNode{Mode: syscall.S_IFREG | 0o644})
				if err != nil {
					b.Fatal(err)
				}
				if err := ds.CommitFile(n.Ino, name, staged[i%len(staged)], 1); err != nil {
					b.Fatal(err)
				}
				if i >= 2 { // keep two, as a rotation does
					if err := ds.Names().Unlink(meta.RootIno, fmt.Sprintf("ckpt-%d.npy", i-2), nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

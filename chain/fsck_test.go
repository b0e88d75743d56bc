package chain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

func hasProblem(rep *CheckReport, kind string) bool {
	for _, p := range rep.Problems {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

func twoVersions(t *testing.T, dir string) (*DirStore, *FileInfo, *FileInfo) {
	return twoVersionsWith(t, dir, policy.Default())
}

func twoVersionsWith(t *testing.T, dir string, p policy.Policy) (*DirStore, *FileInfo, *FileInfo) {
	ds := openTestStore(t, dir, p)
	series := ckpttest.TrainingSeries(11, 60_000, 2)
	i1 := writeFile(t, ds.Store, "ckpt-1.npy", ckpttest.NpyFile(series[0]), 1<<20)
	i2 := writeFile(t, ds.Store, "ckpt-2.npy", ckpttest.NpyFile(series[1]), 1<<20)
	f1, _ := ds.Info(i1)
	f2, _ := ds.Info(i2)
	if f2.Reference != f1.Version {
		t.Fatalf("setup: second version does not delta against the first")
	}
	mustCheck(t, ds.Store, true)
	return ds, f1, f2
}

func TestFsckFindsDanglingReference(t *testing.T) {
	ds, f1, _ := twoVersions(t, "")
	defer ds.Close()
	err := ds.DB.Update(func(tx *meta.Tx) error { return tx.DeleteVersion(f1.Version) })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ds.Check(false)
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(rep, "dangling-reference") {
		t.Fatalf("fsck missed a dangling reference: %v", rep.Problems)
	}
	if !hasProblem(rep, "leak") {
		t.Fatalf("fsck missed the orphaned pages: %v", rep.Problems)
	}
}

func TestFsckFindsLeakedExtent(t *testing.T) {
	ds, _, _ := twoVersions(t, "")
	defer ds.Close()
	loc, err := ds.data.Write(make([]byte, 10*ds.data.BlockSize()))
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.DB.Update(func(tx *meta.Tx) error { return ds.data.Commit(tx, loc) }); err != nil {
		t.Fatal(err)
	}
	rep, _ := ds.Check(false)
	if !hasProblem(rep, "leak") {
		t.Fatalf("fsck missed a leaked extent: %v", rep.Problems)
	}
}

func TestFsckAndReadsFindCorruptChunk(t *testing.T) {
	for _, c := range []encode.Codec{encode.DefaultCodec, encode.Split16} {
		t.Run(c.String(), func(t *testing.T) { corruptChunkFound(t, c) })
	}
}

func corruptChunkFound(t *testing.T, c encode.Codec) {
	dir := t.TempDir()
	p := policy.Default()
	p.Codec = c
	ds, f1, f2 := twoVersionsWith(t, dir, p)
	var pack []meta.Extent
	_ = ds.DB.View(func(tx *meta.Tx) error {
		v, err := tx.Version(f1.Version)
		if err == nil {
			pack = v.Pack
		}
		return err
	})
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip bits in the middle of the first version's pack, on the device's
	// backing file, as a failing flash page would.
	f, err := os.OpenFile(filepath.Join(dir, DeviceFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := (pack[0].Start + pack[0].Len/2) * 4096
	junk := []byte(strings.Repeat("\xa5", 64))
	if _, err := f.WriteAt(junk, at+100); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ds = openTestStore(t, dir, p)
	defer ds.Close()
	rep, err := ds.Check(true)
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(rep, "corrupt-chunk") {
		t.Fatalf("deep fsck missed a corrupted chunk: %v", rep.Problems)
	}
	n, _ := ds.Names().Lookup(meta.RootIno, "ckpt-1.npy")
	r, _ := ds.OpenVersion(n.Version)
	buf := make([]byte, r.Size())
	if _, err := r.ReadAt(buf, 0); !errors.Is(err, ErrChecksum) {
		t.Fatalf("read of a corrupted file: %v, want ErrChecksum", err)
	}
	// The second version deltas against the damaged one: only its own
	// chunks' checksums are checked, and they must catch the damage below.
	if f2.Depth != 1 {
		t.Fatalf("second version at depth %d", f2.Depth)
	}
	ds.DropCaches()
	r, _ = ds.OpenVersion(f2.Version)
	if _, err := r.ReadAt(buf, 0); !errors.Is(err, ErrChecksum) {
		t.Fatalf("read of a delta whose reference is corrupted: %v, want ErrChecksum", err)
	}
}

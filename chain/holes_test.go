package chain

import (
	"bytes"
	"hash/crc32"
	"math/rand"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// chunksOf lists a committed file's chunk records.
func chunksOf(t *testing.T, s *Store, ino meta.Ino) []meta.Chunk {
	t.Helper()
	n, err := s.Names().Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	var out []meta.Chunk
	err = s.db.View(func(tx *meta.Tx) error {
		return tx.ForEachChunk(n.Version, func(c *meta.Chunk) error { out = append(out, *c); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readSpan reads [off, off+n) of a committed file.
func readSpan(t *testing.T, s *Store, ino meta.Ino, off int64, n int) []byte {
	t.Helper()
	in, err := s.Names().Inode(ino)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenVersion(in.Version)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, n)
	if k, err := r.ReadAt(p, off); k != n {
		t.Fatalf("read [%d,+%d): %d bytes, %v", off, n, k, err)
	}
	return p
}

// TestHoleCostsNothing: `truncate -s 64G` of a new file commits one chunk
// record and nothing to the pack, at once (it encoded 64 GiB of zeros, for
// minutes), and reads back as zeros with the right file checksum.
func TestHoleCostsNothing(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	ino := createFile(t, s, "sparse")
	w, err := s.NewWriter(ino, pathIs("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 30
	if err := w.Extend(size, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi := info(t, s, ino); fi.StoredBytes != 0 || len(fi.Pack) != 0 {
		t.Errorf("a 64 GiB hole stored %d bytes in %v", fi.StoredBytes, fi.Pack)
	}
	cs := chunksOf(t, s, ino)
	if len(cs) != 1 || !cs[0].Zeros() || cs[0].Length != size {
		t.Fatalf("chunks %+v, want one chunk of zeros of 64 GiB", cs)
	}
	for _, off := range []int64{0, 1 << 30, size - 4096} {
		if got := readSpan(t, s, ino, off, 4096); !bytes.Equal(got, make([]byte, 4096)) {
			t.Errorf("bytes at %d are not zeros", off)
		}
	}
	n, _ := s.Names().Inode(ino)
	var sum uint32
	_ = s.db.View(func(tx *meta.Tx) error {
		v, err := tx.Version(n.Version)
		if err == nil {
			sum = v.Checksum
		}
		return err
	})
	if want := crc32Zeros(0, size); sum != want {
		t.Errorf("checksum %08x, want %08x", sum, want)
	}
	if rep := mustCheck(t, s, true); rep.Verified != 1 {
		t.Errorf("deep check verified %d versions, want 1", rep.Verified)
	}
	// The deep check does verify the hole against the checksum.
	err = s.db.Update(func(tx *meta.Tx) error {
		v, err := tx.Version(n.Version)
		if err != nil {
			return err
		}
		v.Checksum ^= 1
		return tx.PutVersion(v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Check(true); err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].String(), "checksum") {
		t.Errorf("deep check of a hole under a wrong checksum: %v, %v", rep, err)
	}
}

// TestHolesBetweenData: a file written in a few places, the rest skipped
// (as FileCommit.Run skips a staging file's holes), stores its gaps as
// holes, reads back exactly, and passes a deep check (which reads it all
// and checks the file checksum).
func TestHolesBetweenData(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	rng := rand.New(rand.NewSource(3))
	const size = 400 << 20
	ino := createFile(t, s, "mixed")
	w, err := s.NewWriter(ino, pathIs("mixed"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := map[int64][]byte{
		0:          randomBytes(rng, 1<<20),
		150 << 20:  randomBytes(rng, 3<<20),
		160 << 20:  randomBytes(rng, 5000), // a gap shorter than holeMin
		size - 100: randomBytes(rng, 100),
	}
	for _, off := range []int64{0, 150 << 20, 160 << 20, size - 100} {
		if _, err := w.WriteAt(pieces[off], off, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Extend(size, 1); err != nil { // already that size: a no-op
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	var data, zeros int64
	for _, c := range chunksOf(t, s, ino) {
		if c.Zeros() {
			zeros += c.Length
		} else {
			data += c.Length
		}
	}
	if data > 16<<20 || zeros < size-16<<20 {
		t.Errorf("%d bytes in chunks with content, %d in chunks of zeros: the gaps were encoded", data, zeros)
	}
	if fi := info(t, s, ino); fi.StoredBytes > 8<<20 {
		t.Errorf("stored %d bytes for about 4 MiB of data", fi.StoredBytes)
	}
	for off, want := range pieces {
		if got := readSpan(t, s, ino, off, len(want)); !bytes.Equal(got, want) {
			t.Errorf("bytes at %d differ", off)
		}
	}
	if got := readSpan(t, s, ino, 100<<20, 4096); !bytes.Equal(got, make([]byte, 4096)) {
		t.Error("the hole is not zeros")
	}
	mustCheck(t, s, true)
}

// TestCommitFileHoles: a file rewritten in place through its staging file
// (which holds the committed content, holes kept, as fs copies it in),
// changed in a byte, grown by a truncate and written far past its old end,
// stores the holes of its staging file as holes; a second rewrite of that
// version keeps them holes.
func TestCommitFileHoles(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	rng := rand.New(rand.NewSource(4))
	base := randomBytes(rng, 8<<20)
	ino := writeFile(t, s, "grown", base, 1<<20)
	const size = 1 << 30
	page := randomBytes(rng, 4096)
	for round := 0; round < 2; round++ {
		base[10] = byte(round + 1)
		f := stagedFile(t, size, map[int64][]byte{0: base, 512 << 20: page})
		if err := s.CommitFile(ino, "grown", f, 1); err != nil {
			t.Fatal(err)
		}
		if got := readSpan(t, s, ino, 0, len(base)); !bytes.Equal(got, base) {
			t.Fatalf("round %d: the old content differs", round)
		}
		if got := readSpan(t, s, ino, 512<<20, 4096); !bytes.Equal(got, page) {
			t.Fatalf("round %d: the page in the hole differs", round)
		}
		if got := readSpan(t, s, ino, 300<<20, 4096); !bytes.Equal(got, make([]byte, 4096)) {
			t.Fatalf("round %d: the hole is not zeros", round)
		}
		var zeros int64
		for _, c := range chunksOf(t, s, ino) {
			if c.Zeros() {
				zeros += c.Length
			}
		}
		if zeros < size-(32<<20) {
			t.Errorf("round %d: %d bytes in chunks of zeros, want nearly all of 1 GiB", round, zeros)
		}
	}
	mustCheck(t, s, true)
}

// TestWrittenZerosStoreNothing: zeros written (not declared) are chunks of
// zeros too, cost nothing in the pack, and serve as references: a later
// save coded against them reads back exactly.
func TestWrittenZerosStoreNothing(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	defer ds.Close()
	s := ds.Store
	zeros := make([]byte, 32<<20)
	ino := writeFile(t, s, "zeros.bin", zeros, 1<<20)
	if fi := info(t, s, ino); fi.StoredBytes != 0 {
		t.Errorf("32 MiB of written zeros stored %d bytes", fi.StoredBytes)
	}
	if got := readFile(t, s, "zeros.bin"); !bytes.Equal(got, zeros) {
		t.Error("zeros read back differ")
	}
	// A float32 series whose first save is all zeros (optimizer moments
	// at step 0): the second save is coded against chunks of zeros.
	series := modelSeries(5, []string{"exp_avg"}, 1<<20, 2)
	clear(series[0][len(series[0])-(4<<20):]) // the tensor data is zeros
	var prev meta.VersionID
	for i, data := range series {
		ino := writeFile(t, s, "opt.pt", data, 1<<20)
		fi := info(t, s, ino)
		if i == 1 && fi.Reference != prev {
			t.Errorf("save 1: reference %d, want the save of zeros %d", fi.Reference, prev)
		}
		prev = fi.Version
		if got := readFile(t, s, "opt.pt"); !bytes.Equal(got, data) {
			t.Fatalf("save %d reads back different bytes", i)
		}
		if got := crc32.Checksum(readFile(t, s, "opt.pt"), castagnoli); got != crc32.Checksum(data, castagnoli) {
			t.Fatalf("save %d: checksum", i)
		}
	}
	mustCheck(t, s, true)
}

package meta

import (
	"errors"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openTest(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestRecordsRoundTrip(t *testing.T) {
	in := &Inode{Ino: 7, Mode: 0o100644, Uid: 1000, Gid: 100, Nlink: 2, Size: 1 << 40,
		Atime: -5, Mtime: 1700000000123456789, Ctime: 3, Version: 99, Target: "a/b"}
	var out Inode
	if err := out.unmarshal(in.marshal()); err != nil || !reflect.DeepEqual(*in, out) {
		t.Fatalf("inode round trip: %v\n%+v\n%+v", err, *in, out)
	}
	v := &Version{ID: 3, Ino: 9, Family: "ckpt-#.pt", Ref: 2, Depth: 4, Size: 12345, Checksum: 0xdeadbeef,
		Pack: []Extent{{Start: 10, Len: 5}, {Start: 100, Len: 1}}, PackBytes: 20000, Dependents: 2, Live: true, Codec: "planes",
		Format: "torch-zip", Created: 42, Segments: 7, Chunks: 8, DeltaChunks: 5, UnchangedChunks: 1, TensorBytes: 999,
		Path: "run/ckpt-10.pt", Layout: 0xfeedface12345678, LayoutTensors: 12, Fallback: true, RefReason: RefLayout}
	var vo Version
	if err := vo.unmarshal(v.marshal()); err != nil || !reflect.DeepEqual(*v, vo) {
		t.Fatalf("version round trip: %v\n%+v\n%+v", err, *v, vo)
	}
	s := &Segment{Index: 4, Tensor: true, Key: "data/12", DType: 1, Offset: 64, Length: 4096}
	var so Segment
	if err := so.unmarshal(s.marshal()); err != nil || *s != so {
		t.Fatalf("segment round trip: %v", err)
	}
	c := &Chunk{Offset: 1 << 33, Length: 262144, Segment: 3, Index: 17, PackOff: 5555, EncLen: 100, Delta: true, RefOffset: 1 << 32}
	var co Chunk
	if err := co.unmarshal(c.marshal()); err != nil || *c != co {
		t.Fatalf("chunk round trip: %v", err)
	}
	f := &Family{Name: "x#", Last: 5, Baseline: 2, SinceBaseline: 3, BaselineSize: 10, BaselineBytes: 7, LastSize: 10, LastBytes: 2, Versions: 9}
	var fo Family
	if err := fo.unmarshal(f.marshal()); err != nil || *f != fo {
		t.Fatalf("family round trip: %v", err)
	}
}

// TestVersionRecordV1 reads a version record of format 1 (before Path,
// Layout, Fallback and RefReason): the fields it lacks read as empty.
func TestVersionRecordV1(t *testing.T) {
	v := &Version{ID: 3, Ino: 9, Family: "ckpt-#.pt", Ref: 2, Depth: 4, Size: 12345, Pack: []Extent{{Start: 10, Len: 5}},
		PackBytes: 20000, Live: true, Codec: "planes", Format: "torch-zip", TensorBytes: 999}
	b := v.marshal()
	// Version 2 appends five fields that take one byte each when empty.
	v1 := append([]byte{1}, b[1:len(b)-5]...)
	var out Version
	if err := out.unmarshal(v1); err != nil || !reflect.DeepEqual(*v, out) {
		t.Fatalf("v1 record: %v\n%+v\n%+v", err, *v, out)
	}
	bad := append([]byte{4}, b[1:]...)
	if err := out.unmarshal(bad); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("record version 4: err = %v, want ErrCorruptRecord", err)
	}
}

// TestVersionRecordFidelity: a lossy version is written as record version
// 3 with its fidelity; an exact one stays record version 2.
func TestVersionRecordFidelity(t *testing.T) {
	v := &Version{ID: 3, Ino: 9, Family: "ckpt-#.pt", Ref: 2, Depth: 1, Size: 12345, Pack: []Extent{{Start: 10, Len: 5}},
		PackBytes: 20000, Live: true, Codec: "scaled", Format: "torch-zip", Path: "a/ckpt-3.pt", RefReason: RefRepack}
	if b := v.marshal(); b[0] != 2 {
		t.Fatalf("exact version written as record version %d, want 2", b[0])
	}
	v.Fidelity = "bf16"
	b := v.marshal()
	if b[0] != 3 {
		t.Fatalf("lossy version written as record version %d, want 3", b[0])
	}
	var out Version
	if err := out.unmarshal(b); err != nil || !reflect.DeepEqual(*v, out) {
		t.Fatalf("v3 record: %v\n%+v\n%+v", err, *v, out)
	}
	if err := out.unmarshal(b[:len(b)-1]); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated v3 record: err = %v, want ErrCorruptRecord", err)
	}
}

func TestTruncatedRecordsFail(t *testing.T) {
	b := (&Version{ID: 1, Family: "f", Pack: []Extent{{Start: 1, Len: 2}}, Codec: "planes"}).marshal()
	for n := 0; n < len(b); n++ {
		var v Version
		if err := v.unmarshal(b[:n]); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("unmarshal of %d/%d bytes: err = %v, want ErrCorruptRecord", n, len(b), err)
		}
	}
}

// FuzzRecords decodes arbitrary bytes as every record type: never a panic,
// and whatever decodes re-encodes to a record that decodes the same.
func FuzzRecords(f *testing.F) {
	f.Add((&Inode{Ino: 1, Target: "x"}).marshal())
	f.Add((&Version{ID: 1, Pack: []Extent{{Start: 1, Len: 2}}}).marshal())
	f.Add((&Chunk{Offset: 1, Length: 2}).marshal())
	f.Add((&Segment{Key: "k"}).marshal())
	f.Add((&Family{Name: "n"}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		var n Inode
		if n.unmarshal(b) == nil {
			var m Inode
			if err := m.unmarshal(n.marshal()); err != nil || !reflect.DeepEqual(n, m) {
				t.Fatalf("inode re-encode: %v", err)
			}
		}
		var v Version
		if v.unmarshal(b) == nil {
			var w Version
			if err := w.unmarshal(v.marshal()); err != nil || !reflect.DeepEqual(v, w) {
				t.Fatalf("version re-encode: %v", err)
			}
		}
		var c Chunk
		_ = c.unmarshal(b)
		var s Segment
		_ = s.unmarshal(b)
		var fa Family
		_ = fa.unmarshal(b)
	})
}

func TestNamespace(t *testing.T) {
	db, _ := openTest(t)
	var file Inode
	err := db.Update(func(tx *Tx) error {
		if err := tx.PutInode(&Inode{Ino: RootIno, Mode: 0o40755, Nlink: 2}); err != nil {
			return err
		}
		file = Inode{Mode: 0o100644, Nlink: 1}
		if err := tx.NewInode(&file); err != nil {
			return err
		}
		if err := tx.Link(RootIno, "b.pt", file.Ino); err != nil {
			return err
		}
		if err := tx.Link(RootIno, "a.pt", file.Ino); err != nil {
			return err
		}
		return tx.SetXattr(file.Ino, "user.k", []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if file.Ino <= RootIno {
		t.Fatalf("new inode number %d collides with the root", file.Ino)
	}
	err = db.View(func(tx *Tx) error {
		ents, _ := tx.ReadDir(RootIno)
		if len(ents) != 2 || ents[0].Name != "a.pt" || ents[1].Name != "b.pt" {
			t.Errorf("ReadDir = %+v", ents)
		}
		if ino, err := tx.Lookup(RootIno, "b.pt"); err != nil || ino != file.Ino {
			t.Errorf("Lookup = %d, %v", ino, err)
		}
		if _, err := tx.Lookup(RootIno, "c.pt"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup missing: %v", err)
		}
		if v, ok := tx.Xattr(file.Ino, "user.k"); !ok || string(v) != "v" {
			t.Errorf("Xattr = %q %v", v, ok)
		}
		if tx.DirEmpty(RootIno) || !tx.DirEmpty(file.Ino) {
			t.Error("DirEmpty wrong")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		if err := tx.Unlink(RootIno, "a.pt"); err != nil {
			return err
		}
		return tx.DeleteInode(file.Ino)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if _, ok := tx.Xattr(file.Ino, "user.k"); ok {
			t.Error("xattr survived DeleteInode")
		}
		if _, err := tx.Inode(file.Ino); !errors.Is(err, ErrNotFound) {
			t.Error("inode survived DeleteInode")
		}
		return nil
	})
}

func TestChunksLookup(t *testing.T) {
	db, _ := openTest(t)
	const id = VersionID(5)
	err := db.Update(func(tx *Tx) error {
		for i := int64(0); i < 10; i++ {
			if err := tx.PutChunk(id, &Chunk{Offset: i * 100, Length: 100}); err != nil {
				return err
			}
		}
		// Neighbouring versions must not leak into the lookups.
		if err := tx.PutChunk(id-1, &Chunk{Offset: 5000, Length: 1}); err != nil {
			return err
		}
		return tx.PutChunk(id+1, &Chunk{Offset: 0, Length: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		for _, tc := range []struct {
			from  int64
			first int64
			n     int
		}{{0, 0, 3}, {150, 100, 3}, {199, 100, 3}, {200, 200, 3}, {950, 900, 1}, {999, 900, 1}, {1000, -1, 0}, {5000, -1, 0}} {
			got, err := tx.Chunks(nil, id, tc.from, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n || tc.n > 0 && got[0].Offset != tc.first {
				t.Errorf("Chunks(from %d) = %+v, want %d starting at %d", tc.from, got, tc.n, tc.first)
			}
		}
		var n int
		_ = tx.ForEachChunk(id, func(c *Chunk) error { n++; return nil })
		if n != 10 {
			t.Errorf("ForEachChunk saw %d chunks, want 10", n)
		}
		return nil
	})
	if err := db.Update(func(tx *Tx) error { return tx.DeleteVersion(id) }); err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if got, _ := tx.Chunks(nil, id, 0, 10); len(got) != 0 {
			t.Errorf("chunks survived DeleteVersion: %+v", got)
		}
		if got, _ := tx.Chunks(nil, id+1, 0, 10); len(got) != 1 {
			t.Errorf("DeleteVersion removed a neighbour's chunks")
		}
		return nil
	})
}

func TestAccountingCountsPages(t *testing.T) {
	var pages int64
	db, err := Open(filepath.Join(t.TempDir(), "m.db"), Options{NoSync: true, Account: func(n int64) { pages += n }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := pages
	err = db.Update(func(tx *Tx) error {
		for i := 0; i < 2000; i++ {
			if err := tx.PutChunk(1, &Chunk{Offset: int64(i), Length: 1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2000 chunk records of ~20 bytes span several 4 KiB pages.
	if got := pages - before; got < 5 {
		t.Fatalf("a 2000-record transaction was accounted as %d pages", got)
	}
}

func TestLockedStore(t *testing.T) {
	_, path := openTest(t)
	_, err := Open(path, Options{LockTimeout: 50e6})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestCleanFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil || !db.WasClean() {
		t.Fatalf("new store: clean=%v err=%v", db != nil && db.WasClean(), err)
	}
	db.Close()
	db, _ = Open(path, Options{NoSync: true})
	if !db.WasClean() {
		t.Fatal("store closed cleanly reported unclean")
	}
	// Simulate a crash: close bbolt without marking clean.
	db.bolt.Close()
	db, _ = Open(path, Options{NoSync: true})
	defer db.Close()
	if db.WasClean() {
		t.Fatal("store left without Close reported clean")
	}
}

func TestAllocatorReserveCommitFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAllocator(db, DeviceSpace, 100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := a.Reserve(300)
	if err != nil || len(r1) != 1 || r1[0] != (Extent{Start: 100, Len: 300}) {
		t.Fatalf("Reserve = %v, %v", r1, err)
	}
	if _, err := a.Reserve(200); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error { return a.Commit(tx, r1) }); err != nil {
		t.Fatal(err)
	}
	if a.FreePages() != 500 {
		t.Fatalf("FreePages = %d, want 500", a.FreePages())
	}
	if _, err := a.Reserve(501); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("over-reserve: %v", err)
	}
	// "Crash": reopen without committing r2; its pages are free again, r1's are not.
	db.bolt.Close()
	db, _ = Open(path, Options{NoSync: true})
	defer db.Close()
	a, err = NewAllocator(db, DeviceSpace, 100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if a.FreePages() != 700 {
		t.Fatalf("after reopen FreePages = %d, want 700 (reservation must not survive)", a.FreePages())
	}
	if err := db.Update(func(tx *Tx) error { return a.Free(tx, r1) }); err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		exts, _ := tx.FreeExtents(DeviceSpace)
		if len(exts) != 1 || exts[0] != (Extent{Start: 100, Len: 1000}) {
			t.Errorf("free list after freeing everything = %v, want one merged extent", exts)
		}
		return nil
	})
	if err := db.Update(func(tx *Tx) error { return a.Free(tx, r1) }); !errors.Is(err, ErrBadExtent) {
		t.Fatalf("double free: %v, want ErrBadExtent", err)
	}
	if a.FreePages() != 1000 {
		t.Fatalf("failed transaction changed memory: FreePages = %d", a.FreePages())
	}
}

// TestAllocatorRandom runs random reserve/commit/unreserve/free sequences and
// checks that memory and the persisted list agree and no page is lost.
func TestAllocatorRandom(t *testing.T) {
	db, _ := openTest(t)
	const total = 5000
	a, err := NewAllocator(db, ShadowSpace, 0, total)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	var committed, reserved [][]Extent
	for step := 0; step < 3000; step++ {
		switch op := rng.Intn(4); {
		case op == 0 || len(reserved) == 0 && len(committed) == 0:
			if r, err := a.Reserve(int64(1 + rng.Intn(200))); err == nil {
				reserved = append(reserved, r)
			}
		case op == 1 && len(reserved) > 0:
			i := rng.Intn(len(reserved))
			r := reserved[i]
			reserved = append(reserved[:i], reserved[i+1:]...)
			if err := db.Update(func(tx *Tx) error { return a.Commit(tx, r) }); err != nil {
				t.Fatal(err)
			}
			committed = append(committed, r)
		case op == 2 && len(reserved) > 0:
			i := rng.Intn(len(reserved))
			a.Unreserve(reserved[i])
			reserved = append(reserved[:i], reserved[i+1:]...)
		case len(committed) > 0:
			i := rng.Intn(len(committed))
			r := committed[i]
			committed = append(committed[:i], committed[i+1:]...)
			if err := db.Update(func(tx *Tx) error { return a.Free(tx, r) }); err != nil {
				t.Fatal(err)
			}
		}
		var inUse, held int64
		for _, r := range committed {
			for _, e := range r {
				inUse += e.Len
			}
		}
		for _, r := range reserved {
			for _, e := range r {
				held += e.Len
			}
		}
		if a.FreePages()+inUse+held != total {
			t.Fatalf("step %d: free %d + committed %d + reserved %d != %d", step, a.FreePages(), inUse, held, total)
		}
		var persisted int64
		_ = db.View(func(tx *Tx) error {
			exts, _ := tx.FreeExtents(ShadowSpace)
			for i, e := range exts {
				persisted += e.Len
				if i > 0 && exts[i-1].End() >= e.Start {
					t.Fatalf("persisted free list not merged/sorted: %v", exts)
				}
			}
			return nil
		})
		if persisted != total-inUse {
			t.Fatalf("step %d: persisted free %d, want %d", step, persisted, total-inUse)
		}
	}
}

// TestSealRefusesUpdates: a closing store commits nothing more, so nothing
// is written after its devices stop counting.
func TestSealRefusesUpdates(t *testing.T) {
	db, _ := openTest(t)
	calls := 0
	db.SetAccount(func(int64) { calls++ })
	if err := db.Update(func(tx *Tx) error { return tx.SetCounter("x", 1) }); err != nil {
		t.Fatal(err)
	}
	db.Seal()
	err := db.Update(func(tx *Tx) error { return tx.SetCounter("x", 2) })
	if !errors.Is(err, ErrSealed) {
		t.Fatalf("Update after Seal: %v, want ErrSealed", err)
	}
	if calls != 1 {
		t.Errorf("%d accounted commits, want 1", calls)
	}
	if err := db.View(func(tx *Tx) error {
		if v := tx.Counter("x"); v != 1 {
			t.Errorf("counter %d after a refused update, want 1", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeFromFormat1 writes versions, segments and chunks the way
// format 1 kept them (three buckets, 8- and 16-byte keys) and checks that
// Open moves them under format 2 keys, drops the old buckets, and that two
// versions' parts do not mix.
func TestUpgradeFromFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1pair := func(a, n uint64) []byte { return append(u64key(a), u64key(n)...) }
	err = b.Update(func(tx *bolt.Tx) error {
		vb, _ := tx.CreateBucket(bucketVersions)
		sb, _ := tx.CreateBucket(bucketV1Segments)
		cb, _ := tx.CreateBucket(bucketV1Chunks)
		db, _ := tx.CreateBucket(bucketV1Dirents)
		if err := db.Put(append(u64key(1), "ckpt.pt"...), u64key(11)); err != nil {
			return err
		}
		shb, _ := tx.CreateBucket(bucketV1Shadow)
		if err := shb.Put(u64key(11), []byte{1, 14, 6}); err != nil { // one extent: start 7, 3 pages
			return err
		}
		for id := uint64(1); id <= 2; id++ {
			v := &Version{ID: VersionID(id), Ino: Ino(10 + id), Family: "f", Size: 300}
			if err := vb.Put(u64key(id), v.marshal()); err != nil {
				return err
			}
			s := &Segment{Index: 0, Tensor: true, Key: "w", Offset: 0, Length: 300}
			if err := sb.Put(v1pair(id, 0), s.marshal()); err != nil {
				return err
			}
			for off := int64(0); off < 300; off += 100 {
				c := &Chunk{Offset: off, Length: 100, PackOff: off + int64(id)}
				if err := cb.Put(v1pair(id, uint64(off)), c.marshal()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()

	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *Tx) error {
		if tx.tx.Bucket(bucketV1Segments) != nil || tx.tx.Bucket(bucketV1Chunks) != nil || tx.tx.Bucket(bucketV1Shadow) != nil || tx.tx.Bucket(bucketV1Dirents) != nil {
			t.Error("format 1 buckets survived the upgrade")
		}
		if ino, err := tx.Lookup(1, "ckpt.pt"); err != nil || ino != 11 {
			t.Errorf("directory entry after upgrade: %d %v", ino, err)
		}
		if e, err := tx.ShadowExtents(11); err != nil || !reflect.DeepEqual(e, []Extent{{Start: 7, Len: 3}}) {
			t.Errorf("shadow extents after upgrade: %+v %v", e, err)
		}
		var ids []VersionID
		if err := tx.ForEachVersion(func(v *Version) error { ids = append(ids, v.ID); return nil }); err != nil {
			return err
		}
		if !reflect.DeepEqual(ids, []VersionID{1, 2}) {
			t.Errorf("versions after upgrade: %v", ids)
		}
		for id := VersionID(1); id <= 2; id++ {
			v, err := tx.Version(id)
			if err != nil || v.Ino != Ino(10+id) {
				t.Errorf("version %d: %+v %v", id, v, err)
			}
			segs, err := tx.Segments(id)
			if err != nil || len(segs) != 1 || segs[0].Key != "w" {
				t.Errorf("version %d segments: %+v %v", id, segs, err)
			}
			var offs []int64
			err = tx.ForEachChunk(id, func(c *Chunk) error {
				if c.PackOff != c.Offset+int64(id) {
					t.Errorf("version %d chunk at %d came from another version", id, c.Offset)
				}
				offs = append(offs, c.Offset)
				return nil
			})
			if err != nil || !reflect.DeepEqual(offs, []int64{0, 100, 200}) {
				t.Errorf("version %d chunks: %v %v", id, offs, err)
			}
			if c, err := tx.ChunkAt(id, 100); err != nil || c.Offset != 100 {
				t.Errorf("ChunkAt(%d, 100): %+v %v", id, c, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNewerFormatRefused: a store marked with a later format is not opened
// (and not changed).
func TestNewerFormatRefused(t *testing.T) {
	db, path := openTest(t)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConfig).Put(keyFormat, u64key(Format+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path, Options{NoSync: true}); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("Open of a newer store: %v, want ErrNewerFormat", err)
	}
}

// TestInodesBucketKinds: shadow records and directory entries share
// the inodes bucket; each iteration sees only its own kind.
func TestInodesBucketKinds(t *testing.T) {
	db, _ := openTest(t)
	err := db.Update(func(tx *Tx) error {
		for i := 0; i < 3; i++ {
			n := &Inode{Mode: 0o100644, Nlink: 1}
			if err := tx.NewInode(n); err != nil {
				return err
			}
			if err := tx.PutShadowExtents(n.Ino, []Extent{{Start: int64(10 * i), Len: 2}}); err != nil {
				return err
			}
			if err := tx.Link(RootIno, string(rune('a'+i)), n.Ino); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		inodes, shadows := 0, 0
		if err := tx.ForEachInode(func(*Inode) error { inodes++; return nil }); err != nil {
			return err
		}
		if err := tx.ForEachShadow(func(_ Ino, e []Extent) error {
			if len(e) != 1 || e[0].Len != 2 {
				t.Errorf("shadow extents %+v", e)
			}
			shadows++
			return nil
		}); err != nil {
			return err
		}
		dirents := 0
		if err := tx.ForEachDirent(func(p Ino, name string, c Ino) error {
			if p != RootIno || len(name) != 1 {
				t.Errorf("dirent %d %q -> %d", p, name, c)
			}
			dirents++
			return nil
		}); err != nil {
			return err
		}
		if ents, _ := tx.ReadDir(RootIno); len(ents) != 3 || tx.DirEmpty(RootIno) {
			t.Errorf("ReadDir(root) = %+v", ents)
		}
		if shadows != 3 || inodes != 3 || dirents != 3 {
			t.Errorf("saw %d inodes, %d shadow records, %d directory entries; want 3 of each", inodes, shadows, dirents)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

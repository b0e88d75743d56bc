package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/meta"
)

// testStore is a store on the in-memory backend in a temp dir.
func testStore(t *testing.T) (*chain.Store, string) {
	t.Helper()
	return testStorePolicy(t, policy.Default())
}

// testStorePolicy is testStore with policy p.
func testStorePolicy(t testing.TB, p policy.Policy) (*chain.Store, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := meta.Open(filepath.Join(dir, medium.MetaFile), meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := chain.NewStore(db, memstore.New(4096, 1<<14), nil, chain.Options{Policy: p, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, dir
}

func writeFile(t testing.TB, s *chain.Store, name string, data []byte) {
	t.Helper()
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		if n, err = s.Names().Create(meta.RootIno, name, chain.NewNode{Mode: syscall.S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.NewWriter(n.Ino, func() string { return name })
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 1 << 16 {
		if _, err := w.WriteAt(data[off:min(len(data), off+1<<16)], int64(off), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func readFile(s *chain.Store, name string) ([]byte, error) {
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		return nil, err
	}
	return readID(s, n.Version)
}

// readID reads version id whole.
func readID(s *chain.Store, id meta.VersionID) ([]byte, error) {
	r, err := s.OpenVersion(id)
	if err != nil {
		return nil, err
	}
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return out, nil
}

// series writes a training series of n checkpoints and returns the files.
func series(t *testing.T, s *chain.Store, n int) map[string][]byte {
	files := map[string][]byte{}
	for i, w := range ckpttest.TrainingSeries(3, 200_000, n) {
		name := fmt.Sprintf("ckpt-%d.npy", i)
		files[name] = ckpttest.NpyFile(w)
		writeFile(t, s, name, files[name])
	}
	return files
}

func push(t testing.TB, s *chain.Store, dir string, b bucket.Bucket, o Options) Stats {
	t.Helper()
	u, err := NewUploader(s, dir, b, o)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := u.Push(ctx); err != nil {
		t.Fatal(err)
	}
	return u.Stats()
}

func openReplica(t *testing.T, b bucket.Bucket) *Replica {
	t.Helper()
	r, err := OpenReplica(context.Background(), t.TempDir(), b, chain.Options{Policy: policy.Default(), CacheBytes: 8 << 20}, CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestUploadThenReplica: a series saved as deltas is pushed in small
// pieces; a replica rebuilt from the bucket alone reads every file back
// exactly, and the bucket holds less than the logical bytes.
func TestUploadThenReplica(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 5)
	b := bucket.NewMemory()
	st := push(t, s, dir, b, Options{PieceSize: 256 << 10})
	var logical int64
	for _, d := range files {
		logical += int64(len(d))
	}
	if st.VersionsUploaded != 5 || st.LogicalBytesUploaded != logical || st.RootSeq != 1 {
		t.Fatalf("stats %+v, want 5 versions of %d bytes in root 1", st, logical)
	}
	if st.BytesUploaded <= 0 || st.BytesUploaded >= logical {
		t.Fatalf("uploaded %d bytes for %d logical: the deltas did not travel", st.BytesUploaded, logical)
	}
	r := openReplica(t, b)
	for name, want := range files {
		got, err := readFile(r.Store, name)
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("replica %s differs", name)
		}
	}
	// A second push with nothing new writes nothing.
	if st2 := push(t, s, dir, b, Options{}); st2.RootSeq != 1 || st2.BytesUploaded != st.BytesUploaded {
		t.Fatalf("idle push changed the bucket: %+v", st2)
	}
}

// TestInterruptedUploadInvisible: an upload that dies before its root
// leaves the bucket's newest root as it was; the next pass completes it.
func TestInterruptedUploadInvisible(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 2)
	b := bucket.NewMemory()
	push(t, s, dir, b, Options{PieceSize: 128 << 10})
	writeFile(t, s, "late.npy", files["ckpt-1.npy"][:len(files["ckpt-1.npy"])/2])
	b.Fail = func(op, key string) error {
		if op == "put" && strings.HasPrefix(key, manifestsDir) {
			return errors.New("connection refused")
		}
		return nil
	}
	u, err := NewUploader(s, dir, b, Options{PieceSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = u.Push(ctx)
	cancel()
	if err == nil {
		t.Fatal("push succeeded with manifests refused")
	}
	if st := u.Stats(); st.Retries == 0 || st.LastError == "" {
		t.Fatalf("no retry or error reported: %+v", st)
	}
	u.Close(0)
	if root, err := LatestRoot(context.Background(), b); err != nil || root.Seq != 1 {
		t.Fatalf("newest root after the failed pass: %v, %v; want root 1", root, err)
	}
	r := openReplica(t, b)
	if _, err := r.Store.Names().Lookup(meta.RootIno, "late.npy"); err == nil {
		t.Fatal("a file whose upload failed is visible")
	}
	b.Fail = nil
	push(t, s, dir, b, Options{PieceSize: 128 << 10})
	r2 := openReplica(t, b)
	got, err := readFile(r2.Store, "late.npy")
	if err != nil || !bytes.Equal(got, files["ckpt-1.npy"][:len(files["ckpt-1.npy"])/2]) {
		t.Fatalf("late.npy after the resumed upload: %v", err)
	}
}

// TestCorruptPiece: a damaged byte in one version's piece fails reads of
// that file with a checksum error; files that do not need it read fine.
func TestCorruptPiece(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 1)
	other := bytes.Repeat([]byte("plain text\n"), 50_000)
	writeFile(t, s, "notes.txt", other)
	b := bucket.NewMemory()
	push(t, s, dir, b, Options{})
	b.Corrupt(uploadedPieces(t, s, dir, "ckpt-0.npy")[0], 5000)
	r := openReplica(t, b)
	if _, err := readFile(r.Store, "ckpt-0.npy"); !errors.Is(err, chain.ErrChecksum) {
		t.Fatalf("read of the damaged file: %v, want a checksum error", err)
	}
	if got, err := readFile(r.Store, "notes.txt"); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("undamaged file: %v", err)
	}
	_ = files
}

// TestRemoteGC: deleted files leave the bucket once no kept root names
// them; what stays is exactly what the newest roots need.
func TestRemoteGC(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 4)
	b := bucket.NewMemory()
	o := Options{PieceSize: 256 << 10, KeepRoots: 1}
	push(t, s, dir, b, o)
	before, _ := b.List(context.Background(), "")
	for name := range files {
		if err := s.Names().Unlink(meta.RootIno, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, s, "only.txt", []byte("the one file left\n"))
	push(t, s, dir, b, o)
	after, _ := b.List(context.Background(), "")
	var roots, manifests, pieces int
	for _, k := range after {
		switch {
		case strings.HasPrefix(k, rootsDir):
			roots++
		case strings.HasPrefix(k, manifestsDir):
			manifests++
		case strings.HasPrefix(k, piecesDir):
			pieces++
		}
	}
	if roots != 1 || manifests != 1 || pieces != 1 {
		t.Fatalf("after deleting the series the bucket holds %d roots, %d manifests, %d pieces (was %d objects); want 1 each: %v",
			roots, manifests, pieces, len(before), after)
	}
	r := openReplica(t, b)
	if got, err := readFile(r.Store, "only.txt"); err != nil || string(got) != "the one file left\n" {
		t.Fatalf("only.txt: %q, %v", got, err)
	}
}

// uploadedPieces are the keys of the pieces uploaded of file name's
// version, from the uploader's state in dir.
func uploadedPieces(t *testing.T, s *chain.Store, dir, name string) []string {
	t.Helper()
	in, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := (&state{}).withDB(dir, func(st *state) (map[meta.VersionID]uploadedRec, error) { return st.uploaded() })
	if err != nil {
		t.Fatal(err)
	}
	return recs[in.Version].Pieces
}

// withDB opens dir's state for fn (tests).
func (*state) withDB(dir string, fn func(*state) (map[meta.VersionID]uploadedRec, error)) (map[meta.VersionID]uploadedRec, error) {
	db, err := bolt.Open(filepath.Join(dir, StateFile), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return fn(&state{db: db})
}

// TestDeleteDuringUpload: files deleted while their upload is under way
// stay readable to the uploader (pinned): the root of that pass reads back
// exactly, and the pass after it drops them.
func TestDeleteDuringUpload(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 3)
	b := bucket.NewMemory()
	started, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.Fail = func(op, key string) error {
		if op == "put" && strings.HasPrefix(key, piecesDir) {
			once.Do(func() {
				close(started)
				<-resume
			})
		}
		return nil
	}
	u, err := NewUploader(s, dir, b, Options{PieceSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(0)
	errc := make(chan error, 1)
	go func() { errc <- u.Push(context.Background()) }()
	<-started
	for name := range files {
		if err := s.Names().Unlink(meta.RootIno, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, s, "other.bin", bytes.Repeat([]byte{7}, 300_000)) // reuses freed space if any was freed
	close(resume)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r := openReplica(t, b)
	for name, want := range files {
		got, err := readFile(r.Store, name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s, deleted during its upload, in the pass's root: %v", name, err)
		}
	}
	if err := u.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2 := openReplica(t, b)
	for name := range files {
		if _, err := r2.Store.Names().Lookup(meta.RootIno, name); err == nil {
			t.Errorf("%s still in the next root", name)
		}
	}
	if got, err := readFile(r2.Store, "other.bin"); err != nil || len(got) != 300_000 {
		t.Fatalf("other.bin: %v", err)
	}
}

// TestReplicaCache: what a replica read once is kept on local disk,
// checked against its SHA-256: a second replica of the same directory
// reads it with every piece request to the bucket failing.
func TestReplicaCache(t *testing.T) {
	s, dir := testStore(t)
	files := series(t, s, 2)
	b := bucket.NewMemory()
	push(t, s, dir, b, Options{PieceSize: 200 << 10})
	cache := t.TempDir()
	o := chain.Options{Policy: policy.Default(), CacheBytes: 8 << 20}
	r, err := OpenReplica(context.Background(), cache, b, o, CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if got, err := readFile(r.Store, name); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	r.Close()
	var fetches int
	b.Fail = func(op, key string) error {
		if op == "get" && strings.HasPrefix(key, piecesDir) {
			fetches++
			return errors.New("offline")
		}
		return nil
	}
	r2, err := OpenReplica(context.Background(), cache, b, o, CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for name, want := range files {
		if got, err := readFile(r2.Store, name); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s from the cache: %v", name, err)
		}
	}
	if fetches > 0 {
		t.Fatalf("%d piece fetches with everything cached", fetches)
	}
}

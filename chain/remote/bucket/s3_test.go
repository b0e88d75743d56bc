package bucket_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/remote/s3test"
)

// TestS3 runs the client against a real S3 server: whole and ranged
// reads, listing under a prefix, deletion, a restart that keeps the data,
// and a wrong secret that is refused as ErrDenied.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t, "ckpt", "run/1")
	ctx := context.Background()
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	sum := sha256.Sum256(data)
	if err := b.Put(ctx, "pieces/a", bytes.NewReader(data), int64(len(data)), hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "roots/1", bytes.NewReader([]byte("r")), 1, ""); err != nil {
		t.Fatal(err)
	}
	// A body that does not match the hash it is signed with is refused by
	// the server, and leaves no object.
	bad := append([]byte(nil), data...)
	bad[12345] ^= 1
	if err := b.Put(ctx, "pieces/bad", bytes.NewReader(bad), int64(len(bad)), hex.EncodeToString(sum[:])); err == nil {
		t.Fatal("the server took a body that does not match its signed SHA-256")
	}
	if ok, _ := b.Exists(ctx, "pieces/bad"); ok {
		t.Fatal("a refused put left an object")
	}
	got, err := b.Get(ctx, "pieces/a")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v", err)
	}
	p := make([]byte, 1234)
	if err := b.ReadAt(ctx, "pieces/a", p, 777_777); err != nil || !bytes.Equal(p, data[777_777:777_777+1234]) {
		t.Fatalf("ranged read: %v", err)
	}
	keys, err := b.List(ctx, "pieces/")
	if err != nil || len(keys) != 1 || keys[0] != "pieces/a" {
		t.Fatalf("list: %v %v", keys, err)
	}
	if ok, err := b.Exists(ctx, "pieces/b"); ok || err != nil {
		t.Fatalf("exists of a missing key: %v %v", ok, err)
	}
	if _, err := b.Get(ctx, "pieces/b"); !errors.Is(err, bucket.ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	srv.Restart()
	if ok, err := b.Exists(ctx, "pieces/a"); !ok || err != nil {
		t.Fatalf("after a restart: %v %v", ok, err)
	}
	if err := b.Delete(ctx, "pieces/a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "pieces/a"); ok {
		t.Fatal("deleted object still there")
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	denied, err := bucket.OpenS3(ctx, "s3://ckpt/run/1", bucket.S3Options{Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := denied.Check(ctx); !errors.Is(err, bucket.ErrDenied) {
		t.Fatalf("check with a wrong secret: %v, want access denied", err)
	}
	t.Log(denied.Check(ctx))
	if err := b.Check(ctx); err != nil {
		t.Fatalf("the right credentials after a denied client: %v", err)
	}
}

package s3test

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServerKeepsObjectsAcrossRestart: a bucket made on the server takes
// an object and gives it back, also after a restart on the same data (the
// remote tests restart it to play an outage).
func TestServerKeepsObjectsAcrossRestart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") || s.Port() == 0 {
		t.Fatalf("endpoint %q, port %d", s.Endpoint, s.Port())
	}
	b := s.Bucket(t, "s3test", "run")
	ctx := context.Background()
	body := []byte("a checkpoint's bytes")
	if err := b.Put(ctx, "obj", bytes.NewReader(body), int64(len(body)), ""); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	got, err := b.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("got %q, want %q", got, body)
	}
	keys, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "obj" {
		t.Fatalf("list: %v", keys)
	}
}

// TestEnvNamesTheServer: a ckptfs process started with Env reaches this
// server with these credentials and no user configuration.
func TestEnvNamesTheServer(t *testing.T) {
	s := &Server{Endpoint: "http://127.0.0.1:1", Access: "ckptfsA", Secret: "S"}
	env := strings.Join(s.Env("wrong"), "\n")
	for _, want := range []string{"AWS_ACCESS_KEY_ID=ckptfsA", "AWS_SECRET_ACCESS_KEY=wrong",
		"AWS_CONFIG_FILE=/dev/null", "CKPTFS_S3_ENDPOINT=http://127.0.0.1:1"} {
		if !strings.Contains(env, want) {
			t.Errorf("Env lacks %s:\n%s", want, env)
		}
	}
}

// Package s3test runs a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, its posix backend keeping objects as files
// in a temporary directory), installed by .ci/install-deps into
// $HOME/.cache/ckptfs/versitygw/bin (or named by $CKPTFS_VERSITYGW).
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/bucket"
)

// Binary is the versitygw the tests run.
func Binary() (string, error) {
	if p := os.Getenv("CKPTFS_VERSITYGW"); p != "" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(home, ".cache", "ckptfs", "versitygw", "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("versitygw not installed (make deps installs it): %w", err)
	}
	return p, nil
}

// Server is a running versitygw on 127.0.0.1.
type Server struct {
	t        testing.TB
	bin      string
	Dir      string // where the posix backend keeps buckets
	Endpoint string // http://127.0.0.1:PORT
	Access   string
	Secret   string
	addr     string
	cmd      *exec.Cmd
}

// Start starts a server with fresh credentials and an empty data
// directory. Without versitygw the test fails under CKPTFS_REQUIRE_DEPS=1
// (make test) and is skipped loudly otherwise.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		msg := fmt.Sprintf("!! SKIPPED: an S3 server is unavailable (%v)", err)
		if os.Getenv("CKPTFS_REQUIRE_DEPS") != "" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{t: t, bin: bin, Dir: t.TempDir(), addr: addr, Endpoint: "http://" + addr,
		Access: "ckptfs" + token(4), Secret: token(16)}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

func token(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Stop kills the server (its data stays in Dir).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server (again) on the same address and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	log, err := os.OpenFile(filepath.Join(s.Dir, "..", "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(s.bin, "--access", s.Access, "--secret", s.Secret, "--port", s.addr, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("versitygw did not listen on %s: %v", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Env is the environment a ckptfs process needs to reach the server with
// the given secret (s.Secret, or a wrong one): AWS variables only, no
// config files of the user running the tests.
func (s *Server) Env(secret string) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.Access, "AWS_SECRET_ACCESS_KEY=" + secret,
		"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true", "CKPTFS_S3_ENDPOINT=" + s.Endpoint}
}

// SetEnv sets Env(s.Secret) for the rest of the test (in-process clients).
func (s *Server) SetEnv(t *testing.T) {
	for _, kv := range s.Env(s.Secret) {
		k, v, _ := cutEq(kv)
		t.Setenv(k, v)
	}
}

func cutEq(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// Bucket creates a bucket and returns a client of prefix in it, with the
// environment SetEnv set.
func (s *Server) Bucket(t *testing.T, name, prefix string) *bucket.S3 {
	t.Helper()
	s.SetEnv(t)
	url := "s3://" + name
	if prefix != "" {
		url += "/" + prefix
	}
	b, err := bucket.OpenS3(context.Background(), url, bucket.S3Options{Endpoint: s.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// Port is the server's TCP port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.addr)
	n, _ := strconv.Atoi(p)
	return n
}

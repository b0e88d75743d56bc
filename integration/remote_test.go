package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/s3test"
)

// The remote tests run a real S3 server (versitygw, s3test) on 127.0.0.1.

const remoteURL = "s3://ckpt/run"

// soloWriter names the one writer of the single-node tests: its objects
// are under run/writers/solo/.
const soloWriter = "solo"

// remoteStats is the "remote" object of a replicating mount's stats.json.
type remoteStats struct {
	RootSeq              int64   `json:"root_seq"`
	VersionsUploaded     int64   `json:"versions_uploaded"`
	PendingVersions      int     `json:"pending_versions"`
	BytesUploaded        int64   `json:"bytes_uploaded"`
	LogicalBytesUploaded int64   `json:"logical_bytes_uploaded"`
	LagMaxSeconds        float64 `json:"lag_max_seconds"`
	Retries              int64   `json:"retries"`
	LastError            string  `json:"last_error"`
}

func (m *mount) remoteStats() remoteStats {
	m.t.Helper()
	var r struct {
		Remote *remoteStats `json:"remote"`
	}
	if m.liveStats(&r); r.Remote == nil {
		m.t.Fatal("stats.json has no remote object")
	}
	return *r.Remote
}

// waitUploaded waits until the mount's root names everything it holds: no
// version pending and logical bytes up to want.
func (m *mount) waitUploaded(want int64, limit time.Duration) remoteStats {
	m.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := m.remoteStats()
		if st.PendingVersions == 0 && st.LogicalBytesUploaded >= want && st.RootSeq > 0 {
			// One more pass: the root follows the last version.
			time.Sleep(300 * time.Millisecond)
			if st2 := m.remoteStats(); st2.PendingVersions == 0 && st2.RootSeq == st.RootSeq {
				return st2
			}
			continue
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("upload not done after %v: %+v", limit, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicaMount mounts the bucket read-only on a fresh store.
func replicaMount(t *testing.T, srv *s3test.Server) *mount {
	t.Helper()
	return newMount(t, "--remote", remoteURL, "--endpoint", srv.Endpoint, "--read-only")
}

// weights is a float32 .npy of n values drifting with epoch (deltas well).
func weights(epoch, n int) []byte {
	rng := rand.New(rand.NewSource(7))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64()*0.05 + float64(epoch)*1e-4*math.Sin(float64(i)*0.01))
	}
	return npyFloat32(vals, "")
}

func writeAll(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func startS3(t *testing.T) *s3test.Server {
	t.Helper()
	needFuse(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "ckpt", "") // also sets the AWS environment the daemons inherit
	return srv
}

// TestRemoteUploadWhileSaving: a series saved into a replicating mount is
// uploaded while the saves go on (several roots); a read-only mount of the
// bucket on an empty store lists the same files and reads every byte back;
// the bucket got fewer bytes than the logical ones; a deletion reaches
// the bucket.
func TestRemoteUploadWhileSaving(t *testing.T) {
	srv := startS3(t)
	m := newMount(t, "--device-size", "256MiB", "--remote", remoteURL, "--remote-writer", soloWriter, "--remote-keep-for", "0s", "--endpoint", srv.Endpoint, "--remote-piece-size", "1MiB")
	var logical int64
	for epoch := 0; epoch < 6; epoch++ {
		data := weights(epoch, 600_000)
		writeAll(t, m.path(fmt.Sprintf("run/epoch-%d/model.npy", epoch)), data)
		logical += int64(len(data))
		time.Sleep(400 * time.Millisecond)
	}
	writeAll(t, m.path("run/notes.txt"), []byte("hello from node A\n"))
	logical += int64(len("hello from node A\n"))
	// A sparse file: a hole and a run of zeros travel as chunks of zeros.
	sparse, err := os.Create(m.path("run/sparse.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(80 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt([]byte("data in the hole"), 70<<20); err != nil {
		t.Fatal(err)
	}
	if err := sparse.Close(); err != nil {
		t.Fatal(err)
	}
	logical += 80 << 20
	if err := os.Symlink("epoch-5", m.path("run/latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(m.path("run/notes.txt"), m.path("run/notes-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(m.path("run/notes.txt"), "user.origin", []byte("node A"), 0); err != nil {
		t.Fatal(err)
	}
	st := m.waitUploaded(logical, 2*time.Minute)
	t.Logf("remote stats: %+v", st)
	if st.RootSeq < 2 {
		t.Errorf("one root for six saves %v apart: nothing was uploaded while saving", 400*time.Millisecond)
	}
	if st.BytesUploaded >= st.LogicalBytesUploaded {
		t.Errorf("uploaded %d bytes for %d logical: deltas did not travel", st.BytesUploaded, st.LogicalBytesUploaded)
	}
	if out := run(t, "stats", m.dir); !strings.Contains(out, "Remote "+remoteURL) || !strings.Contains(out, "upload lag") {
		t.Errorf("ckptfs stats shows no remote paragraph:\n%s", out)
	}
	if out := run(t, "stats", "--json", m.dir); !strings.Contains(out, `"bytes_uploaded"`) {
		t.Errorf("ckptfs stats --json has no remote figures:\n%.2000s", out)
	}
	r := replicaMount(t, srv)
	sameFiles(t, m.dir, r.dir)
	if target, err := os.Readlink(r.path("run/latest")); err != nil || target != "epoch-5" {
		t.Errorf("symlink in the replica: %q, %v", target, err)
	}
	var st1, st2 syscall.Stat_t
	if err := syscall.Stat(r.path("run/notes.txt"), &st1); err != nil || st1.Nlink != 2 {
		t.Errorf("hard-linked file in the replica: nlink %d, %v", st1.Nlink, err)
	}
	if err := syscall.Stat(r.path("run/notes-link.txt"), &st2); err != nil || st2.Ino != st1.Ino {
		t.Errorf("the two names of a hard link are different files in the replica (%v)", err)
	}
	if v, err := getxattr(r.path("run/notes.txt"), "user.origin"); err != nil || v != "node A" {
		t.Errorf("xattr in the replica: %q, %v", v, err)
	}
	if err := os.WriteFile(r.path("run/new.txt"), []byte("x"), 0o644); err == nil {
		t.Error("a write into the read-only replica succeeded")
	}
	r.stop()
	if out, err := exec.Command(ckptfsBin, "mount", "--store", r.store, r.dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "read-only replica") {
		exec.Command(ckptfsBin, "umount", r.dir).Run()
		t.Errorf("a writable mount of a replica store: %v: %s", err, out)
	}

	// A deletion: the next root lacks the file, and so does a new replica.
	if err := os.Remove(m.path("run/epoch-0/model.npy")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for m.remoteStats().RootSeq == st.RootSeq {
		if time.Now().After(deadline) {
			t.Fatal("no new root after a deletion")
		}
		time.Sleep(200 * time.Millisecond)
	}
	r2 := replicaMount(t, srv)
	if _, err := os.Stat(r2.path("run/epoch-0/model.npy")); !os.IsNotExist(err) {
		t.Errorf("deleted file in a new replica: %v", err)
	}
	sameFiles(t, m.dir, r2.dir)

	// Everything deleted, then one new file: once the roots that named the
	// series are out of the kept two, its objects leave the bucket.
	cur := m.remoteStats().RootSeq
	if err := os.RemoveAll(m.path("run")); err != nil {
		t.Fatal(err)
	}
	waitRoot := func(after int64) int64 {
		deadline := time.Now().Add(time.Minute)
		for {
			if seq := m.remoteStats().RootSeq; seq > after {
				return seq
			}
			if time.Now().After(deadline) {
				t.Fatal("no new root")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	seq := waitRoot(cur)
	writeAll(t, m.path("after.txt"), []byte("after the series\n"))
	waitRoot(seq)
	m.waitUploaded(0, time.Minute)
	if n := countObjects(t, srv, "writers/"+soloWriter+"/"+"manifests"); n != 1 {
		t.Errorf("after deleting the series the bucket holds %d manifests, want 1 (after.txt's)", n)
	}
	if n := countObjects(t, srv, "writers/"+soloWriter+"/"+"roots"); n != 2 {
		t.Errorf("the bucket holds %d roots, want the kept 2", n)
	}
}

// TestRemoteKillDuringUpload: one file is uploaded and visible; then the
// daemon is killed while the next two upload (throttled). The bucket shows
// nothing partial: a replica lists the first file, whole, and not the
// others. The next mount resumes and completes the upload.
func TestRemoteKillDuringUpload(t *testing.T) {
	srv := startS3(t)
	flags := []string{"--device-size", "256MiB", "--remote", remoteURL, "--remote-writer", soloWriter, "--remote-keep-for", "0s", "--endpoint", srv.Endpoint, "--remote-piece-size", "256KiB"}
	m := newMount(t, append(flags, "--remote-bwlimit", "1MiB")...)
	rng := rand.New(rand.NewSource(1))
	var logical int64
	written := map[string][]byte{}
	for i := 0; i < 3; i++ {
		data := make([]byte, 3<<20) // incompressible: the pack is as big
		rng.Read(data)
		name := fmt.Sprintf("shard-%d.bin", i)
		written[name] = data
		logical += int64(len(data))
		writeAll(t, m.path(name), data)
		if i == 0 {
			m.waitUploaded(int64(len(data)), 2*time.Minute)
		}
	}
	before := countObjects(t, srv, "writers/"+soloWriter+"/"+"pieces")
	deadline := time.Now().Add(time.Minute)
	for countObjects(t, srv, "writers/"+soloWriter+"/"+"pieces") < before+2 {
		if time.Now().After(deadline) {
			t.Fatal("no piece of the second file uploaded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.kill9()
	if n := countObjects(t, srv, "writers/"+soloWriter+"/"+"pieces"); n >= before+24 {
		t.Fatalf("all %d pieces were uploaded before the kill: the test did not kill during the upload", n)
	}
	r := replicaMount(t, srv)
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		got, err := os.ReadFile(r.path(e.Name()))
		if err != nil || !bytes.Equal(got, written[e.Name()]) {
			t.Errorf("the replica after the kill serves %s partially or wrong (%v)", e.Name(), err)
		}
	}
	if len(names) != 1 || names[0] != "shard-0.bin" {
		t.Errorf("after the kill the replica lists %v, want only shard-0.bin (uploaded before)", names)
	}
	r.stop()
	m.args = flags
	m.start()
	st := m.waitUploaded(logical, 2*time.Minute)
	t.Logf("after the restart: %+v", st)
	r2 := replicaMount(t, srv)
	sameFiles(t, m.dir, r2.dir)
}

// countObjects counts the objects under run/DIR in the server's posix
// directory.
func countObjects(t *testing.T, srv *s3test.Server, dir string) int {
	ents, err := os.ReadDir(filepath.Join(srv.Dir, "ckpt", "run", dir))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// TestRemoteServerRestart: the server goes away during an upload and comes
// back with its data; the uploader warns, backs off, retries, and
// completes with nothing lost.
func TestRemoteServerRestart(t *testing.T) {
	srv := startS3(t)
	m := newMount(t, "--device-size", "256MiB", "--remote", remoteURL, "--remote-writer", soloWriter, "--endpoint", srv.Endpoint,
		"--remote-piece-size", "256KiB", "--remote-bwlimit", "2MiB")
	rng := rand.New(rand.NewSource(2))
	var logical int64
	for i := 0; i < 2; i++ {
		data := make([]byte, 2<<20)
		rng.Read(data)
		writeAll(t, m.path(fmt.Sprintf("part-%d.bin", i)), data)
		logical += int64(len(data))
	}
	deadline := time.Now().Add(time.Minute)
	for countObjects(t, srv, "writers/"+soloWriter+"/"+"pieces") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no piece uploaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Stop()
	writeAll(t, m.path("while-down.npy"), weights(1, 300_000))
	logical += int64(len(weights(1, 300_000)))
	time.Sleep(3 * time.Second)
	if st := m.remoteStats(); st.LastError == "" || st.Retries == 0 {
		t.Errorf("server down, but stats report no error or retry: %+v", st)
	}
	log, _ := os.ReadFile(filepath.Join(m.store, "ckptfs.log"))
	if !bytes.Contains(log, []byte("retrying with back-off")) {
		t.Errorf("no warning in the log while the server is down:\n%s", log)
	}
	srv.Restart()
	st := m.waitUploaded(logical, 2*time.Minute)
	if st.LastError != "" {
		t.Errorf("error still reported after the server came back: %q", st.LastError)
	}
	r := replicaMount(t, srv)
	sameFiles(t, m.dir, r.dir)
}

// TestRemoteAccessDenied: a wrong secret fails the mount, writable or
// read-only, with a clear message, and leaves no store behind.
func TestRemoteAccessDenied(t *testing.T) {
	srv := startS3(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	for _, extra := range [][]string{nil, {"--read-only"}} {
		base := t.TempDir()
		mp, store := filepath.Join(base, "mnt"), filepath.Join(base, "store")
		os.Mkdir(mp, 0o755)
		args := append([]string{"mount", "--store", store, "--remote", remoteURL, "--endpoint", srv.Endpoint}, extra...)
		out, err := exec.Command(ckptfsBin, append(args, mp)...).CombinedOutput()
		if err == nil {
			exec.Command(ckptfsBin, "umount", mp).Run()
			t.Fatalf("mount %v with a wrong secret succeeded", extra)
		}
		if !strings.Contains(string(out), "access denied") || !strings.Contains(string(out), "AWS_SECRET_ACCESS_KEY") {
			t.Errorf("mount %v: unclear error: %s", extra, out)
		}
		if isMounted(mp) {
			t.Errorf("mounted anyway")
		}
		if _, err := os.Stat(store); !os.IsNotExist(err) {
			t.Errorf("the failed mount left its store behind: %v", err)
		}
	}
}

// TestRemoteCorruptObject: a byte flipped in one file's object on the
// server: reading that file fails with EIO (logged), reading the others
// works.
func TestRemoteCorruptObject(t *testing.T) {
	srv := startS3(t)
	m := newMount(t, "--device-size", "256MiB", "--remote", remoteURL, "--remote-writer", soloWriter, "--endpoint", srv.Endpoint)
	data := make([]byte, 3<<20)
	rand.New(rand.NewSource(3)).Read(data)
	writeAll(t, m.path("victim.bin"), data)
	writeAll(t, m.path("fine.npy"), weights(2, 200_000))
	m.waitUploaded(int64(len(data)+len(weights(2, 200_000))), time.Minute)
	// The victim's piece is the biggest: random bytes do not compress.
	dir := filepath.Join(srv.Dir, "ckpt", "run", "writers", soloWriter, "pieces")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	var size int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Size() > size {
			victim, size = filepath.Join(dir, e.Name()), fi.Size()
		}
	}
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, size/2)
	b[0] ^= 0x5a
	f.WriteAt(b, size/2)
	f.Close()

	r := replicaMount(t, srv)
	r.allowErrors(`checksum mismatch`, `is corrupt: its SHA-256`, `msg="corrupt data"`)
	if _, err := os.ReadFile(r.path("victim.bin")); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("read of the corrupted file: %v, want EIO", err)
	}
	if !sameContent(t, m.path("fine.npy"), r.path("fine.npy")) {
		t.Error("the undamaged file differs")
	}
	// The damage is one range: the file's head reads fine.
	fh, err := os.Open(r.path("victim.bin"))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 256<<10)
	if _, err := fh.ReadAt(head, 0); err != nil || !bytes.Equal(head, data[:len(head)]) {
		t.Errorf("the head of the corrupted file, before the damage: %v", err)
	}
	fh.Close()
	r.stop()
	log, _ := os.ReadFile(filepath.Join(r.store, "ckptfs.log"))
	if !bytes.Contains(log, []byte("corrupt")) {
		t.Errorf("the replica's log does not report the corruption:\n%s", log)
	}
}

// TestRemotePushPull: an unmounted store pushed to the bucket and pulled
// into a new store gives an ordinary store: fsck --deep is clean, every
// file reads back byte for byte, and the next save continues the chain.
func TestRemotePushPull(t *testing.T) {
	srv := startS3(t)
	a := newMount(t, "--device-size", "256MiB")
	for epoch := 0; epoch < 4; epoch++ {
		writeAll(t, a.path(fmt.Sprintf("ckpt/epoch-%d.npy", epoch)), weights(epoch, 300_000))
	}
	writeAll(t, a.path("README"), []byte("pushed\n"))
	a.stop()
	out := run(t, "push", "--store", a.store, "--endpoint", srv.Endpoint, remoteURL)
	var st remoteStats
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.VersionsUploaded != 5 || st.RootSeq != 1 {
		t.Fatalf("push said %s (%v)", out, err)
	}
	// A second push has nothing to do.
	out = run(t, "push", "--store", a.store, "--endpoint", srv.Endpoint, remoteURL)
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.RootSeq != 1 {
		t.Fatalf("second push said %s (%v)", out, err)
	}
	if out := run(t, "stats", "--store", a.store); !strings.Contains(out, "5 versions uploaded") {
		t.Errorf("ckptfs stats --store after a push:\n%s", out)
	}
	base := t.TempDir()
	pulled := filepath.Join(base, "store")
	run(t, "pull", "--store", pulled, "--endpoint", srv.Endpoint, remoteURL)
	fsck(t, pulled)
	if _, err := exec.Command(ckptfsBin, "pull", "--store", pulled, "--endpoint", srv.Endpoint, remoteURL).CombinedOutput(); err == nil {
		t.Error("pull into an existing store succeeded")
	}
	a.start()
	// Four saves make a chain of depth 3, the default bound: the next
	// save may go one deeper, so that it shows whether the chain came.
	b := &mount{t: t, dir: filepath.Join(base, "mnt"), store: pulled, args: []string{"--max-depth", "5"}}
	os.Mkdir(b.dir, 0o755)
	b.start()
	t.Cleanup(b.stop)
	sameFiles(t, a.dir, b.dir)
	writeAll(t, b.path("ckpt/epoch-4.npy"), weights(4, 300_000))
	for _, f := range b.stats().Files {
		if f.Path == "ckpt/epoch-4.npy" || f.Path == "/ckpt/epoch-4.npy" {
			if f.Depth == 0 {
				t.Errorf("the first save into the pulled store is a baseline: the chain did not come along")
			}
			return
		}
	}
	t.Errorf("ckpt/epoch-4.npy not in the pulled store's report")
}

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/s3test"
)

// Several nodes write one bucket prefix, each under its own writer name
// (--remote-writer); a read-only mount shows the union of their trees, and
// with --follow it picks up newer consistent cuts while mounted (issue 29).
// The ranks of a distributed save are real processes (py/dcp_ranks.py, gloo
// on the CPU), rank r writing into node r's mount.

const rankScript = "py/dcp_ranks.py"

// writerFlags are the mount flags of node `name` writing into remoteURL.
func writerFlags(srv *s3test.Server, name string) []string {
	return []string{"--device-size", "256MiB", "--remote", remoteURL, "--endpoint", srv.Endpoint, "--remote-writer", name, "--remote-keep-for", "3s"}
}

func writerMount(t *testing.T, srv *s3test.Server, name string, extra ...string) *mount {
	t.Helper()
	return newMount(t, append(writerFlags(srv, name), extra...)...)
}

// followerMount is a union reader that picks up newer cuts every 300ms.
func followerMount(t *testing.T, srv *s3test.Server) *mount {
	t.Helper()
	return newMount(t, "--remote", remoteURL, "--endpoint", srv.Endpoint, "--read-only", "--follow", "--follow-interval", "300ms")
}

// startNodes mounts writers node-0 … node-(n-1); each writes a small file
// of its own and uploads it, so that every writer has a root before a
// reader mounts.
func startNodes(t *testing.T, srv *s3test.Server, n int) []*mount {
	t.Helper()
	nodes := make([]*mount, n)
	for i := range nodes {
		nodes[i] = writerMount(t, srv, fmt.Sprintf("node-%d", i))
		writeAll(t, nodes[i].path(fmt.Sprintf("ckpt/host-%d.txt", i)), []byte(fmt.Sprintf("node-%d\n", i)))
	}
	for _, m := range nodes {
		m.waitUploaded(treeBytes(t, m.dir), time.Minute)
	}
	return nodes
}

func ckptDirs(nodes []*mount) []string {
	dirs := make([]string, len(nodes))
	for i, m := range nodes {
		dirs[i] = m.path("ckpt")
	}
	return dirs
}

// pyEnv is the environment of the python processes: one thread each, the
// test machine may have two cores.
func pyEnv(extra ...string) []string {
	return append(append(os.Environ(), "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1"), extra...)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// saveRanks runs `dcp_ranks.py save` as one process per rank (gloo, world
// size len(dirs)), rank r saving into dirs[r], and waits for them all. If
// one fails the others (blocked in a collective) are killed.
func saveRanks(t *testing.T, py string, dirs []string, args ...string) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	type result struct {
		rank int
		err  error
	}
	cmds := make([]*exec.Cmd, len(dirs))
	stderrs := make([]*bytes.Buffer, len(dirs))
	done := make(chan result, len(dirs))
	for r, dir := range dirs {
		cmd := exec.Command(py, append([]string{rankScript, "save", "--dir", dir}, args...)...)
		cmd.Env = pyEnv("MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", len(dirs)))
		stderrs[r] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = stderrs[r], stderrs[r]
		if err := cmd.Start(); err != nil {
			t.Fatalf("start rank %d: %v", r, err)
		}
		cmds[r] = cmd
		go func() { done <- result{r, cmd.Wait()} }()
	}
	killAll := func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	}
	timeout := time.After(3 * time.Minute)
	var failed []string
	for waiting := len(dirs); waiting > 0; waiting-- {
		select {
		case res := <-done:
			if res.err != nil {
				failed = append(failed, fmt.Sprintf("rank %d: %v", res.rank, res.err))
				killAll()
			}
		case <-timeout:
			killAll()
			for ; waiting > 0; waiting-- {
				<-done
			}
			t.Fatalf("dcp_ranks.py save %v into %v: not done after 3 minutes\n%s", args, dirs, rankLogs(stderrs))
		}
	}
	if failed != nil {
		t.Fatalf("dcp_ranks.py save %v into %v failed: %s\n%s", args, dirs, strings.Join(failed, "; "), rankLogs(stderrs))
	}
}

func rankLogs(logs []*bytes.Buffer) string {
	var b strings.Builder
	for r, l := range logs {
		fmt.Fprintf(&b, "--- rank %d:\n%s\n", r, lastLines(l.Bytes(), 20))
	}
	return b.String()
}

// checkRanks runs `dcp_ranks.py check` (one process, no process group) on
// a union tree: every tensor of every step must load and equal what the
// ranks saved.
func checkRanks(t *testing.T, py, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{rankScript, "check", "--dir", dir}, args...)...)
	cmd.Env = pyEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the union mount does not hold the checkpoints the ranks saved (dcp_ranks.py check %v): %v\n%s", args, err, lastLines(out, 20))
	}
}

// watcher is `dcp_ranks.py watch` running on a follower mount.
type watcher struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
}

func startWatch(t *testing.T, py, dir string, args ...string) *watcher {
	t.Helper()
	w := &watcher{done: make(chan error, 1)}
	w.cmd = exec.Command(py, append([]string{rankScript, "watch", "--dir", dir}, args...)...)
	w.cmd.Env = pyEnv()
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	// Before the follower unmounts (cleanups run last first).
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.done
		w.done <- nil
	})
	return w
}

// wait returns the steps the watcher verified, in the order it saw them;
// it fails the test if the watcher failed (a step visible but not whole).
func (w *watcher) wait(t *testing.T, limit time.Duration) []int {
	t.Helper()
	var err error
	select {
	case err = <-w.done:
		w.done <- err
	case <-time.After(limit):
		w.cmd.Process.Kill()
		err = <-w.done
		w.done <- err
		t.Fatalf("the follower's watcher still runs after %v:\n%s\n%s", limit, w.stdout.String(), lastLines(w.stderr.Bytes(), 20))
	}
	if err != nil {
		t.Fatalf("the follower showed a checkpoint that was not whole, or not every step (dcp_ranks.py watch: %v):\n%s\n%s",
			err, w.stdout.String(), lastLines(w.stderr.Bytes(), 20))
	}
	var seen []int
	for _, line := range strings.Split(strings.TrimSpace(w.stdout.String()), "\n") {
		var v struct {
			Step   int     `json:"step"`
			SeenAt float64 `json:"seen_at"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("watcher printed %q: %v", line, err)
		}
		seen = append(seen, v.Step)
	}
	t.Logf("the follower showed, whole, steps %v:\n%s", seen, w.stdout.String())
	return seen
}

// treeBytes sums the sizes of the regular files below a mount.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, size := range regularFiles(t, dir) {
		n += size
	}
	return n
}

// regularFiles lists the regular files below root (not .ckptfs/) with
// their sizes.
func regularFiles(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() && p == filepath.Join(root, ".ckptfs") {
			return filepath.SkipDir
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			out[rel] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// sameUnion checks that union shows exactly the writers' files, merged by
// path, each with its writer's bytes (no path may be on two writers).
func sameUnion(t *testing.T, union string, writers ...*mount) {
	t.Helper()
	got := regularFiles(t, union)
	owner := map[string]string{}
	for _, w := range writers {
		for p := range regularFiles(t, w.dir) {
			if o, ok := owner[p]; ok {
				t.Fatalf("test bug: %s is on two writers (%s and %s)", p, o, w.dir)
			}
			owner[p] = w.dir
			if _, ok := got[p]; !ok {
				t.Errorf("the union mount lacks %s (written on %s)", p, w.dir)
			} else if !sameContent(t, filepath.Join(w.dir, p), filepath.Join(union, p)) {
				t.Errorf("the union mount's %s differs from the writer's (%s)", p, w.dir)
			}
		}
	}
	for p := range got {
		if _, ok := owner[p]; !ok {
			t.Errorf("the union mount shows %s, which no writer has", p)
		}
	}
}

// bucketObjects lists the objects under run/SUB in the server's posix
// directory (keys relative to it, with their sizes).
func bucketObjects(t *testing.T, srv *s3test.Server, sub string) map[string]int64 {
	t.Helper()
	root := filepath.Join(srv.Dir, "ckpt", "run", sub)
	out := map[string]int64{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil // gone while listing, or no such prefix
		}
		if p != root && strings.HasPrefix(fi.Name(), ".") {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			out[rel] = fi.Size()
		}
		return nil
	})
	return out
}

// stableObjects waits until the objects under run/SUB stay the same for a
// while and returns them.
func stableObjects(t *testing.T, srv *s3test.Server, sub string) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last, since := bucketObjects(t, srv, sub), time.Now()
	for time.Since(since) < 1500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the objects under run/%s keep changing while its writer is idle", sub)
		}
		time.Sleep(250 * time.Millisecond)
		if cur := bucketObjects(t, srv, sub); !sameObjects(cur, last) {
			last, since = cur, time.Now()
		}
	}
	return last
}

func sameObjects(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// writeUploaded writes a file into a writer's mount and waits until the
// writer has uploaded it (its logical bytes grew by the file's size).
func writeUploaded(t *testing.T, m *mount, rel string, data []byte) {
	t.Helper()
	before := m.remoteStats().LogicalBytesUploaded
	writeAll(t, m.path(rel), data)
	m.waitUploaded(before+int64(len(data)), time.Minute)
}

// waitRootAfter waits for m's next root after seq.
func waitRootAfter(t *testing.T, m *mount, seq int64) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if cur := m.remoteStats().RootSeq; cur > seq {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s uploaded no root after %d in a minute", m.dir, seq)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventually polls cond until it holds, failing with what after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// checkMembers: each writer left a member record, run/members/NAME.json,
// and its objects under run/writers/NAME/; nothing went to the
// single-writer layout at the top of the prefix.
func checkMembers(t *testing.T, srv *s3test.Server, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(srv.Dir, "ckpt", "run", "members", name+".json"))
		var v any
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err != nil {
			t.Errorf("member record run/members/%s.json: %v (%.200s)", name, err, b)
		}
		if n := len(bucketObjects(t, srv, "writers/"+name)); n == 0 {
			t.Errorf("no object under run/writers/%s/", name)
		}
	}
	for _, dir := range []string{"pieces", "manifests", "roots"} {
		if n := countObjects(t, srv, dir); n != 0 {
			t.Errorf("%d objects under run/%s/: a named writer must keep to run/writers/NAME/", n, dir)
		}
	}
}

// checkDeltas: each writer uploaded fewer bytes than it replicated.
func checkDeltas(t *testing.T, stats []remoteStats) {
	t.Helper()
	for i, st := range stats {
		t.Logf("node-%d: %+v", i, st)
		if st.BytesUploaded <= 0 || st.BytesUploaded >= st.LogicalBytesUploaded {
			t.Errorf("node-%d uploaded %d bytes for %d logical: its saves' deltas did not travel", i, st.BytesUploaded, st.LogicalBytesUploaded)
		}
	}
}

// openPart opens p and reads its first n bytes: the rest is read later,
// after the file left the tree, from the same descriptor.
func openPart(t *testing.T, p string, n int) (*os.File, []byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatalf("open %s on the follower: %v", p, err)
	}
	t.Cleanup(func() { f.Close() })
	head := make([]byte, n)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatalf("read %s on the follower: %v", p, err)
	}
	return f, head
}

// checkHeld reads the rest of a file held open across a cut that deleted
// it: it must keep the content it had when opened.
func checkHeld(t *testing.T, f *os.File, head, want []byte) {
	t.Helper()
	rest, err := io.ReadAll(f)
	got := append(head, rest...)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s, held open on the follower while a newer cut deleted it, changed: read %d bytes (%v), want its %d bytes as opened",
			f.Name(), len(got), err, len(want))
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRemoteTwoNodesDCP: two nodes, one rank each, save
// torch.distributed.checkpoint steps into their own mounts, which
// replicate into one prefix under their writer names. A follower sees each
// step appear whole (its .metadata never before both shards), a fresh
// union mount loads every step resharded to one rank, each writer
// uploaded deltas, and the bucket keeps each writer to its own objects.
// One writer's deletions and GC leave the other's objects alone; deleted
// steps leave the follower, files held open there keep their bytes; the
// same path from both writers shows the newer one.
func TestRemoteTwoNodesDCP(t *testing.T) {
	srv := startS3(t)
	py := venvPython(t)
	nodes := startNodes(t, srv, 2)
	f := followerMount(t, srv)

	const steps = "1,2,3,4,5"
	w := startWatch(t, py, f.path("ckpt"), "--mode", "dcp", "--steps", steps, "--timeout", "150")
	saveRanks(t, py, ckptDirs(nodes), "--mode", "dcp", "--steps", steps, "--interval", "0.3")
	stats := []remoteStats{nodes[0].waitUploaded(treeBytes(t, nodes[0].dir), 2*time.Minute),
		nodes[1].waitUploaded(treeBytes(t, nodes[1].dir), 2*time.Minute)}
	seen := w.wait(t, 3*time.Minute)
	sorted := append([]int(nil), seen...)
	sort.Ints(sorted)
	if fmt.Sprint(sorted) != "[1 2 3 4 5]" {
		t.Errorf("the follower verified steps %v, want each of 1…5 once", seen)
	}
	checkDeltas(t, stats)
	checkMembers(t, srv, "node-0", "node-1")
	// ckptfs stats of the follower names both writers and the cut.
	if out := run(t, "stats", f.dir); !strings.Contains(out, "writer node-0: root") || !strings.Contains(out, "writer node-1: root") || !strings.Contains(out, "cut at") {
		t.Errorf("ckptfs stats of the follower:\n%s", out)
	}

	u := unionMount(t, srv)
	checkRanks(t, py, u.path("ckpt"), "--mode", "dcp", "--steps", steps)
	sameUnion(t, u.dir, nodes...)
	u.stop()

	// node-0 alone deletes steps 1 and 2 (their .metadata and rank 0's
	// shards), with a file of its own that no later version can need:
	// its GC must then delete objects of its own and none of node-1's.
	blob := make([]byte, 1<<20)
	rand.New(rand.NewSource(29)).Read(blob)
	writeUploaded(t, nodes[0], "ckpt/step-1/node-0-extra.bin", blob)
	eventually(t, 30*time.Second, "the follower does not show node-0-extra.bin", func() bool {
		return exists(f.path("ckpt/step-1/node-0-extra.bin"))
	})
	want0 := readFile(t, nodes[0].path("ckpt/step-1/__0_0.distcp"))
	want1 := readFile(t, nodes[1].path("ckpt/step-1/__1_0.distcp"))
	held0, head0 := openPart(t, f.path("ckpt/step-1/__0_0.distcp"), 4096)
	held1, head1 := openPart(t, f.path("ckpt/step-1/__1_0.distcp"), 4096)
	before0 := bucketObjects(t, srv, "writers/node-0")
	before1 := stableObjects(t, srv, "writers/node-1")
	seq1 := nodes[1].remoteStats().RootSeq

	seq := nodes[0].remoteStats().RootSeq
	for _, d := range []string{"ckpt/step-1", "ckpt/step-2"} {
		if err := os.RemoveAll(nodes[0].path(d)); err != nil {
			t.Fatal(err)
		}
	}
	seq = waitRootAfter(t, nodes[0], seq)
	// Two more roots push the ones that named the deleted files out of
	// those kept.
	for i := 0; i < 2; i++ {
		writeAll(t, nodes[0].path(fmt.Sprintf("ckpt/gc-%d.txt", i)), []byte("more roots\n"))
		seq = waitRootAfter(t, nodes[0], seq)
	}
	nodes[0].waitUploaded(0, time.Minute)
	eventually(t, time.Minute, "node-0's GC deleted none of its objects after its deletions and three roots", func() bool {
		now := bucketObjects(t, srv, "writers/node-0")
		for k := range before0 {
			if _, ok := now[k]; !ok {
				return true
			}
		}
		return false
	})
	after1 := bucketObjects(t, srv, "writers/node-1")
	var lost []string
	for k := range before1 {
		if _, ok := after1[k]; !ok {
			lost = append(lost, k)
		}
	}
	if seq1 == nodes[1].remoteStats().RootSeq {
		if len(lost) > 0 || len(after1) != len(before1) {
			t.Errorf("idle node-1's objects changed while node-0 deleted and collected: %d before, %d after, lost %v",
				len(before1), len(after1), lost)
		}
	} else if len(lost) > 0 {
		t.Logf("idle node-1 uploaded a root of its own meanwhile (root %d to %d) and dropped %d objects", seq1, nodes[1].remoteStats().RootSeq, len(lost))
	}

	// The union: steps 1 and 2 have only node-1's shards left, whole.
	u2 := unionMount(t, srv)
	for _, p := range []string{"ckpt/step-1/.metadata", "ckpt/step-2/.metadata", "ckpt/step-1/__0_0.distcp", "ckpt/step-1/node-0-extra.bin"} {
		if exists(u2.path(p)) {
			t.Errorf("the union mount still shows %s, which node-0 deleted", p)
		}
	}
	for _, p := range []string{"ckpt/step-1/__1_0.distcp", "ckpt/step-2/__1_0.distcp"} {
		if !exists(u2.path(p)) || !sameContent(t, nodes[1].path(p), u2.path(p)) {
			t.Errorf("node-1's %s is gone or differs in the union after node-0's deletions and GC", p)
		}
	}
	checkRanks(t, py, u2.path("ckpt"), "--mode", "dcp", "--steps", "3,4,5")
	sameUnion(t, u2.dir, nodes...)
	u2.stop()

	eventually(t, 30*time.Second, "the follower still shows the .metadata of steps 1 and 2, which node-0 deleted", func() bool {
		return !exists(f.path("ckpt/step-1/.metadata")) && !exists(f.path("ckpt/step-2/.metadata")) && !exists(f.path("ckpt/step-1/__0_0.distcp"))
	})
	if !exists(f.path("ckpt/step-1/__1_0.distcp")) {
		t.Errorf("the follower lost node-1's step-1/__1_0.distcp, which node-1 did not delete")
	}
	checkHeld(t, held0, head0, want0)

	// node-1 deletes them too: the steps leave the union, and the follower.
	seq = nodes[1].remoteStats().RootSeq
	for _, d := range []string{"ckpt/step-1", "ckpt/step-2"} {
		if err := os.RemoveAll(nodes[1].path(d)); err != nil {
			t.Fatal(err)
		}
	}
	waitRootAfter(t, nodes[1], seq)
	nodes[1].waitUploaded(0, time.Minute)
	eventually(t, 30*time.Second, "the follower still shows step-1 or step-2 after both writers deleted them", func() bool {
		return !exists(f.path("ckpt/step-1")) && !exists(f.path("ckpt/step-2"))
	})
	checkHeld(t, held1, head1, want1)
	u3 := unionMount(t, srv)
	for _, p := range []string{"ckpt/step-1", "ckpt/step-2"} {
		if exists(u3.path(p)) {
			t.Errorf("the union mount shows %s after both writers deleted it", p)
		}
	}
	sameUnion(t, u3.dir, nodes...)
	u3.stop()

	// The same path from both writers: the newer is shown, and the
	// conflict is logged.
	writeUploaded(t, nodes[0], "ckpt/notes.txt", []byte("from node-0\n"))
	writeUploaded(t, nodes[1], "ckpt/notes.txt", []byte("from node-1, later\n"))
	eventually(t, 30*time.Second, "the follower does not show node-1's newer ckpt/notes.txt", func() bool {
		b, _ := os.ReadFile(f.path("ckpt/notes.txt"))
		return string(b) == "from node-1, later\n"
	})
	u4 := unionMount(t, srv)
	if b, err := os.ReadFile(u4.path("ckpt/notes.txt")); err != nil || string(b) != "from node-1, later\n" {
		t.Errorf("ckpt/notes.txt, written by node-0 then by node-1: the union shows %q (%v), want node-1's, the newer", b, err)
	}
	u4.stop()
	if log, _ := os.ReadFile(filepath.Join(u4.store, "ckptfs.log")); !bytes.Contains(bytes.ToLower(log), []byte("conflict")) {
		t.Errorf("the union mount did not log the conflict on ckpt/notes.txt:\n%s", lastLines(log, 20))
	}
}

// TestRemoteTwoNodesDeepSpeedStyle: two ranks save DeepSpeed-style
// checkpoints (each rank its optimizer partition, rank 0 the model, then,
// after a barrier, rank 0 writes `latest`) into their nodes' mounts. A
// follower never shows a `latest` naming a step before every file of that
// step is there whole; a fresh union mount verifies every step.
func TestRemoteTwoNodesDeepSpeedStyle(t *testing.T) {
	srv := startS3(t)
	py := venvPython(t)
	nodes := startNodes(t, srv, 2)
	f := followerMount(t, srv)

	const steps = "1,2,3,4"
	w := startWatch(t, py, f.path("ckpt"), "--mode", "deepspeed", "--steps", steps, "--timeout", "150")
	saveRanks(t, py, ckptDirs(nodes), "--mode", "deepspeed", "--steps", steps, "--interval", "0.3")
	stats := []remoteStats{nodes[0].waitUploaded(treeBytes(t, nodes[0].dir), 2*time.Minute),
		nodes[1].waitUploaded(treeBytes(t, nodes[1].dir), 2*time.Minute)}
	seen := w.wait(t, 3*time.Minute)
	if len(seen) == 0 || seen[len(seen)-1] != 4 {
		t.Errorf("the follower verified steps %v: want the last, 4, among them", seen)
	}
	checkDeltas(t, stats)
	checkMembers(t, srv, "node-0", "node-1")

	u := unionMount(t, srv)
	checkRanks(t, py, u.path("ckpt"), "--mode", "deepspeed", "--steps", steps)
	sameUnion(t, u.dir, nodes...)
}

// TestRemoteKillWriterMidUpload: node-1 uploads slowly (--remote-bwlimit);
// after a step is saved, node-0 has uploaded its part (rank 0's shard and
// .metadata) and node-1's daemon is killed while its shard is still on the
// way. A union mount made then shows the step's .metadata only if node-1's
// shard is there whole. Remounted, node-1 completes the upload and a fresh
// union mount loads the step.
func TestRemoteKillWriterMidUpload(t *testing.T) {
	srv := startS3(t)
	py := venvPython(t)
	w0 := writerMount(t, srv, "node-0")
	w1 := newMount(t, append(writerFlags(srv, "node-1"), "--remote-bwlimit", "2MiB")...)
	nodes := []*mount{w0, w1}

	// Step 1, small, is uploaded by both.
	saveRanks(t, py, ckptDirs(nodes), "--mode", "dcp", "--steps", "1")
	w0.waitUploaded(treeBytes(t, w0.dir), time.Minute)
	w1.waitUploaded(treeBytes(t, w1.dir), time.Minute)

	// Step 2 is big: ~14 MB a rank, ~6 s at node-1's 2 MiB/s.
	saveRanks(t, py, ckptDirs(nodes), "--mode", "dcp", "--steps", "2x8")
	want1 := treeBytes(t, w1.dir)
	shard1 := readFile(t, w1.path("ckpt/step-2/__1_0.distcp"))
	inFlight := func() bool {
		st := w1.remoteStats()
		if st.PendingVersions == 0 && st.LogicalBytesUploaded >= want1 {
			t.Fatalf("node-1 uploaded all of step 2 before it could be killed: make it bigger or node-1 slower (%+v)", st)
		}
		return st.PendingVersions > 0
	}
	eventually(t, 30*time.Second, "node-1 never had step 2's versions pending", inFlight)
	w0.waitUploaded(treeBytes(t, w0.dir), time.Minute)
	if !exists(w0.path("ckpt/step-2/.metadata")) {
		t.Fatal("test bug: node-0 holds no step-2/.metadata")
	}
	if !inFlight() {
		t.Fatalf("node-1's upload of step 2 was over before the kill: %+v", w1.remoteStats())
	}
	w1.kill9()

	u := unionMount(t, srv)
	if exists(u.path("ckpt/step-2/.metadata")) {
		t.Logf("after the kill the union shows step-2/.metadata: the step must be whole")
		checkRanks(t, py, u.path("ckpt"), "--mode", "dcp", "--steps", "1,2x8")
	} else {
		t.Logf("after the kill the union hides step-2/.metadata (node-1's shard is not all uploaded); step-2 shows %v", names(u.path("ckpt/step-2")))
		checkRanks(t, py, u.path("ckpt"), "--mode", "dcp", "--steps", "1")
	}
	if b, err := os.ReadFile(u.path("ckpt/step-2/__1_0.distcp")); err == nil && !bytes.Equal(b, shard1) {
		t.Errorf("after the kill the union shows node-1's step-2/__1_0.distcp partial or wrong: %d bytes, want %d", len(b), len(shard1))
	}
	u.stop()

	w1.args = writerFlags(srv, "node-1")
	w1.start()
	w1.waitUploaded(treeBytes(t, w1.dir), 2*time.Minute)
	u2 := unionMount(t, srv)
	if !exists(u2.path("ckpt/step-2/.metadata")) {
		t.Errorf("node-1 restarted and uploaded, yet the union hides step-2/.metadata")
	}
	checkRanks(t, py, u2.path("ckpt"), "--mode", "dcp", "--steps", "1,2x8")
	sameUnion(t, u2.dir, nodes...)
}

func names(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// unionMount mounts a fresh union reader once every writer had time to
// publish a heartbeat: a writer's watermark, and so the cut, trails its
// last pass by up to a second while it is busy (docs/REMOTE.md), and a
// reader mounted sooner hides the files written since, as it must.
func unionMount(t *testing.T, srv *s3test.Server) *mount {
	t.Helper()
	time.Sleep(2500 * time.Millisecond)
	return replicaMount(t, srv)
}

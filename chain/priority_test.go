package chain

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/nandsim"
)

// threadsAtNice counts this process's threads whose nice value is nice.
func threadsAtNice(t *testing.T, nice int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread has ended
		}
		// The fields after the command's closing parenthesis start at
		// the state (field 3); nice is field 19.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if v, err := strconv.Atoi(f[16]); err == nil && v == nice {
			n++
		}
	}
	return n
}

// waitThreadsAtNice polls until want threads are at nice, or fails.
func waitThreadsAtNice(t *testing.T, nice, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := threadsAtNice(t, nice)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d threads at nice %d, want %d", what, got, nice, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEncodeThreadsLowered: with EncodeNice, the encode workers run on
// threads of their own at the lowered priority, the caller's thread is
// untouched, and closing the store leaves no lowered thread behind.
// Without EncodeNice nothing is lowered.
func TestEncodeThreadsLowered(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	const lower, workers = 7, 3
	if threadsAtNice(t, base+lower) != 0 {
		t.Fatalf("threads at nice %d before any store", base+lower)
	}
	for _, nice := range []int{0, lower} {
		ds, err := OpenDir(t.TempDir(), DirOptions{Options: Options{Policy: policy.Default(), CacheBytes: 8 << 20,
			Workers: workers, EncodeNice: nice}, Device: nandsim.SmallConfig(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if nice > 0 {
			want = workers
		}
		waitThreadsAtNice(t, base+lower, want, "open")
		data := randomBytes(rand.New(rand.NewSource(1)), 3<<20)
		writeFile(t, ds.Store, "f", data, 64<<10)
		if got := readFile(t, ds.Store, "f"); !bytes.Equal(got, data) {
			t.Fatal("read back differs")
		}
		waitThreadsAtNice(t, base+lower, want, "after a save")
		if n, _ := threadNice(); n != base {
			t.Fatalf("the caller's thread is at nice %d, want %d", n, base)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
		waitThreadsAtNice(t, base+lower, 0, "closed")
	}
}

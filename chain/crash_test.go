package chain

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// crashHelperEnv, when set, makes the test binary a victim process: it
// commits some files, reports them, then ingests forever until killed.
const crashHelperEnv = "CKPTFS_CHAIN_CRASH_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		crashVictim(dir)
		return
	}
	if dir := os.Getenv(repackVictimEnv); dir != "" {
		repackVictim(dir)
		return
	}
	os.Exit(m.Run())
}

func crashVictim(dir string) {
	ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: policy.Default()}, Device: nandsim.SmallConfig()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var t testing.T
	s := ds.Store
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	// Commit the next file of the series (the parent knows the contents).
	round := 0
	if n, err := s.Names().Lookup(meta.RootIno, "round"); err == nil {
		round = int(n.Size)
	}
	series := ckpttest.TrainingSeries(12, 30_000, round+2)
	writeFile(&t, s, fmt.Sprintf("ckpt-%d.npy", round), ckpttest.NpyFile(series[round]), 1<<16)
	writeFile(&t, s, "round", bytes.Repeat([]byte{1}, round+1), 1)
	fmt.Println("committed", round)
	// Then, until killed: ingest, rename and delete, never finishing.
	n, _ := s.Names().Create(meta.RootIno, "partial.npy", NewNode{Mode: syscall.S_IFREG | 0o644})
	w, _ := s.NewWriter(n.Ino, pathIs("partial.npy"))
	fmt.Println("ingesting")
	for off := int64(0); ; off += 4096 {
		w.WriteAt(randomBytes(rng, 4096), off, 1)
		if off%(1<<20) == 0 {
			_ = s.Names().Rename(meta.RootIno, fmt.Sprintf("ckpt-%d.npy", round), meta.RootIno, "tmp", 0, nil)
			_ = s.Names().Rename(meta.RootIno, "tmp", meta.RootIno, fmt.Sprintf("ckpt-%d.npy", round), 0, nil)
		}
	}
}

// TestCrashDuringIngest kills a process with SIGKILL while it ingests and
// renames, then checks that every committed file is intact, nothing
// uncommitted is visible, and fsck finds no leaked pages.
func TestCrashDuringIngest(t *testing.T) {
	trials := 4
	if os.Getenv("CKPTFS_FULL") != "" {
		trials = 20
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(13))
	for trial := 0; trial < trials; trial++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		for lines.Scan() && lines.Text() != "ingesting" {
		}
		time.Sleep(time.Duration(rng.Intn(300)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		ds := openTestStore(t, dir, policy.Default())
		series := ckpttest.TrainingSeries(12, 30_000, trial+1)
		// A kill between the victim's two renames leaves the newest file
		// under its temporary name: legal, and its content must be intact.
		if _, err := ds.Names().Lookup(meta.RootIno, "tmp"); err == nil {
			if err := ds.Names().Rename(meta.RootIno, "tmp", meta.RootIno, fmt.Sprintf("ckpt-%d.npy", trial), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i <= trial; i++ {
			if !bytes.Equal(readFile(t, ds.Store, fmt.Sprintf("ckpt-%d.npy", i)), ckpttest.NpyFile(series[i])) {
				t.Fatalf("trial %d: committed ckpt-%d damaged by the crash", trial, i)
			}
		}
		if n, err := ds.Names().Lookup(meta.RootIno, "partial.npy"); err == nil && n.Size != 0 {
			t.Fatalf("trial %d: uncommitted partial.npy visible with %d bytes", trial, n.Size)
		}
		mustCheck(t, ds.Store, true)
		if err := ds.Names().Unlink(meta.RootIno, "partial.npy", nil); err != nil {
			t.Fatal(err)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/meta"
)

// trainedStore saves a drifting series of n checkpoints into a new store
// whose policy makes chains of up to 11 deltas, and returns the contents.
func trainedStore(t *testing.T, dir string, n int) map[string][]byte {
	t.Helper()
	dev, err := deviceForSize("64MiB")
	if err != nil {
		t.Fatal(err)
	}
	p := policy.Default()
	p.SnapDis = 12
	ds, err := storedir.Open(dir, storedir.Options{Options: chain.Options{Policy: p}, Media: medium.Options{Device: dev, NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	rng := rand.New(rand.NewSource(3))
	w := make([]float32, 120_000)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	want := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ckpt-%02d.npy", i)
		want[name] = ckpttest.NpyFile(w)
		node, err := ds.Names().Create(meta.RootIno, name, chain.NewNode{Mode: syscall.S_IFREG | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		wr, err := ds.NewWriter(node.Ino, func() string { return name })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wr.WriteAt(want[name], 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := wr.Commit(); err != nil {
			t.Fatal(err)
		}
		for j := range w {
			w[j] += float32(rng.NormFloat64() * 1e-4)
		}
	}
	return want
}

func readStoreFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	ds, err := openExistingStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for name, b := range want {
		n, err := ds.Names().Lookup(meta.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ds.OpenVersion(n.Version)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, r.Size())
		if _, err := r.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s differs after repack", name)
		}
	}
}

func TestRepackCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	want := trainedStore(t, dir, 22)

	out, err := runCkptfs(t, "repack", "--store", dir, "--max-depth", "2", "--dry-run", "--json")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	var dry repackOutput
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.DevicePagesWritten != 0 || dry.Recoded != 0 || dry.StoredAfter != dry.StoredBefore {
		t.Fatalf("a dry run wrote: %s", out)
	}

	out, err = runCkptfs(t, "repack", "--store", dir, "--max-depth", "2", "--json")
	if err != nil {
		t.Fatalf("repack: %v\n%s", err, out)
	}
	var rep repackOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Window != 4 || rep.WorstDecodesBefore != 12 || rep.WorstDecodesAfter != 3 {
		t.Errorf("window %d, worst decodes %d -> %d, want 4, 12 -> 3", rep.Window, rep.WorstDecodesBefore, rep.WorstDecodesAfter)
	}
	if rep.Recoded == 0 || rep.DevicePagesWritten < rep.PackPagesWritten || rep.SavesCost <= 0 {
		t.Errorf("re-coded %d versions, %d device pages for %d pack pages, %.2f saves: the writes are not all charged",
			rep.Recoded, rep.DevicePagesWritten, rep.PackPagesWritten, rep.SavesCost)
	}
	readStoreFiles(t, dir, want)
	if out, err := runCkptfs(t, "fsck", "--store", dir, "--deep"); err != nil || !strings.Contains(out, "clean") {
		t.Fatalf("fsck after repack: %v\n%s", err, out)
	}

	out, err = runCkptfs(t, "repack", "--store", dir)
	if err != nil {
		t.Fatalf("repack at the store's bound: %v\n%s", err, out)
	}
	for _, s := range []string{"at most 3 deltas per chain", "against the 4 files before", "further back", "ckpt-#.npy", "stored bytes:", "worst decodes per chunk: 3 -> 4"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	readStoreFiles(t, dir, want)
	if out, err := runCkptfs(t, "repack", "--store", dir, "--window", "0"); err == nil || !strings.Contains(err.Error(), "--window 0") {
		t.Errorf("--window 0 accepted: %v\n%s", err, out)
	}
}

func TestRepackRefusesReplicatedStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	newSmallStore(t, dir)
	if err := os.WriteFile(filepath.Join(dir, remote.StateFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCkptfs(t, "repack", "--store", dir)
	if err == nil || !strings.Contains(err.Error(), "object store") {
		t.Fatalf("repack of a replicated store: %v\n%s", err, out)
	}
}

func TestRepackTierFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	want := trainedStore(t, dir, 6)
	if out, err := runCkptfs(t, "repack", "--store", dir, "--exact-newest", "2"); err == nil || !strings.Contains(err.Error(), "give --lossy") {
		t.Errorf("--exact-newest without --lossy: %v\n%s", err, out)
	}
	if out, err := runCkptfs(t, "repack", "--store", dir, "--lossy", "q3"); err == nil || !strings.Contains(err.Error(), "unknown lossy scheme") {
		t.Errorf("--lossy q3: %v\n%s", err, out)
	}
	readStoreFiles(t, dir, want) // nothing changed
	out, err := runCkptfs(t, "repack", "--store", dir, "--lossy", "bf16", "--exact-newest", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, s := range []string{"LOSSY tier bf16: float32 values rounded to the nearest bfloat16", "tiered now"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	out, err = runCkptfs(t, "stats", "--store", dir, "--files")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "LOSSY: 4 files") || strings.Count(out, " bf16 ") != 4 {
		t.Errorf("stats after a tier of 4 files:\n%s", out)
	}
}

// TestRepackFamilyFilter: --family limits the repack (and a tier) to the
// families it names.
func TestRepackFamilyFilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	trainedStore(t, dir, 6)
	out, err := runCkptfs(t, "repack", "--store", dir, "--family", "other-#.npy", "--lossy", "bf16", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep repackOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Families) != 0 || rep.Recoded != 0 {
		t.Fatalf("a pattern matching no family repacked: %s", out)
	}
	out, err = runCkptfs(t, "repack", "--store", dir, "--family", "ckpt-*", "--lossy", "bf16", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	rep = repackOutput{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Families) != 1 || rep.Families[0].Tiered != 3 {
		t.Fatalf("--family ckpt-*: %s", out)
	}
	if _, err := runCkptfs(t, "repack", "--store", dir, "--family", "[", "--dry-run"); err == nil {
		t.Fatal("a malformed pattern was accepted")
	}
}

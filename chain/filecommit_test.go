package chain

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/meta"
)

// TestRecoverStaged: a store opened after a daemon died ingests the saves
// it left closed in their staging files, under the names the files have
// now, keeps the previous content of a file whose save was still open (of
// a closed save a writer was appending to, that save), and drops staging
// files of inodes gone since, and copies kept as backing files (done);
// fsck --deep finds it clean.
func TestRecoverStaged(t *testing.T) {
	dir := t.TempDir()
	ds := openTestStore(t, dir, policy.Default())
	series := ckpttest.TrainingSeries(4, 20_000, 3)
	old := ckpttest.NpyFile(series[0])
	writeFile(t, ds.Store, "open.npy", old, 1<<16)
	closedIno := writeFile(t, ds.Store, "tmp.npy", nil, 1)
	goneIno := writeFile(t, ds.Store, "gone.npy", nil, 1)
	logIno := writeFile(t, ds.Store, "train.log", []byte("step 0\n"), 1<<16)
	openIno, err := ds.Store.Names().Lookup(meta.RootIno, "open.npy")
	if err != nil {
		t.Fatal(err)
	}
	stage := func(ino meta.Ino, data []byte, s staging.State) {
		f, err := ds.Staging.Create(uint64(ino))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Mark(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	saved := ckpttest.NpyFile(series[1])
	stage(closedIno, saved, staging.Closed)
	stage(openIno.Ino, ckpttest.NpyFile(series[2]), staging.Open)
	stage(goneIno, saved, staging.Closed)
	stage(openIno.Ino, old, staging.Done) // a read copy, or a save's staging file after its commit
	logSaved := []byte("step 0\nstep 1\n")
	appending, err := ds.Staging.Create(uint64(logIno))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appending.Write(logSaved); err != nil {
		t.Fatal(err)
	}
	if err := appending.Mark(staging.Closed); err != nil {
		t.Fatal(err)
	}
	if err := appending.MarkAppending(int64(len(logSaved))); err != nil {
		t.Fatal(err)
	}
	if _, err := appending.Write([]byte("step 2, still open")); err != nil {
		t.Fatal(err)
	}
	appending.Close()
	// The closed save was renamed over the live name, and the other file
	// deleted, before the daemon died.
	if err := ds.Store.Names().Rename(meta.RootIno, "tmp.npy", meta.RootIno, "latest.npy", 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := ds.Store.Names().Unlink(meta.RootIno, "gone.npy", func(meta.Ino) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}

	ds = openTestStore(t, dir, policy.Default())
	defer ds.Close()
	if got := readFile(t, ds.Store, "latest.npy"); !bytes.Equal(got, saved) {
		t.Errorf("latest.npy after recovery: %d bytes, want its closed save (%d)", len(got), len(saved))
	}
	if got := readFile(t, ds.Store, "train.log"); !bytes.Equal(got, logSaved) {
		t.Errorf("train.log after recovery: %q, want the closed save it was appended to (%q)", got, logSaved)
	}
	if got := readFile(t, ds.Store, "open.npy"); !bytes.Equal(got, old) {
		t.Errorf("open.npy after recovery: %d bytes, want its previous content (%d)", len(got), len(old))
	}
	if info, err := ds.Store.Info(closedIno); err != nil || info.Family != policy.FamilyOf("latest.npy") {
		t.Errorf("recovered save's family: %+v %v, want %q", info, err, policy.FamilyOf("latest.npy"))
	}
	left, err := os.ReadDir(filepath.Join(dir, staging.Name))
	if err != nil || len(left) != 0 {
		t.Errorf("staging directory after recovery: %v %v", left, err)
	}
	rep, err := ds.Store.Check(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Errorf("fsck: %v", p)
	}
	if _, err := ds.Store.Names().Inode(goneIno); err == nil {
		t.Errorf("deleted inode %d came back", goneIno)
	}
}

// FuzzStagingNames: names found in a staging directory are parsed without
// panicking, and only well-formed ones are taken.
func FuzzStagingNames(f *testing.F) {
	for _, s := range []string{"12-345.closed", "1-2.open", "x", "-.done", "9-9.other", "1-2.closed.x", "3-4.append-17", "3-4.append--1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		dir := t.TempDir()
		if len(name) == 0 || len(name) > 200 || bytes.ContainsAny([]byte(name), "/\x00") || name == "." || name == ".." {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			return
		}
		d, err := staging.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := d.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.State != staging.Open && e.State != staging.Closed && e.State != staging.Done &&
				(e.State != staging.Appending || e.Keep < 0) {
				t.Fatalf("%q parsed as state %q (keep %d)", name, e.State, e.Keep)
			}
		}
	})
}

// HostFull tells the host filesystem's lack of room (a commit then waits
// for room, keeping its staging file) from the simulated device's (the
// store's capacity: the commit fails).
func TestHostFull(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrNoSpace, false},
		{fmt.Errorf("pack: %w", ErrNoSpace), false},
		{&os.PathError{Op: "write", Path: "device.img", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("commit x: %w", &os.PathError{Op: "write", Path: "device.img", Err: syscall.EDQUOT}), true},
		{ErrHostFull, true},
		{syscall.EIO, false},
	} {
		if got := HostFull(c.err); got != c.want {
			t.Errorf("HostFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

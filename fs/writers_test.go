package fs

import (
	"bytes"
	"encoding/binary"
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

	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"golang.org/x/sys/unix"
)

// Saves the way today's writers make them, through a mount: each must
// stream (no fallback) and be coded against the previous save of the same
// file (docs/REFERENCES.md).

// safetensorsSeries is n saves of a small float32 model that drifts a
// little between saves, as training does.
func safetensorsSeries(n int) [][]byte {
	rng := rand.New(rand.NewSource(4))
	names := []string{"wte", "h.0.mlp", "h.1.mlp"}
	const elems = 120_000
	w := make([][]float32, len(names))
	for i := range w {
		w[i] = make([]float32, elems)
		for j := range w[i] {
			w[i][j] = float32(rng.NormFloat64() * 0.05)
		}
	}
	var out [][]byte
	for v := 0; v < n; v++ {
		var b bytes.Buffer
		b.Write(safetensorsHeader(names, elems))
		for i := range w {
			for _, x := range w[i] {
				binary.Write(&b, binary.LittleEndian, math.Float32bits(x))
			}
			for j := range w[i] {
				w[i][j] += float32(rng.NormFloat64() * 1e-4)
			}
		}
		out = append(out, b.Bytes())
	}
	return out
}

// safetensorsHeader is the length-prefixed header of a safetensors file of
// float32 tensors of elems elements each, named names, in that order.
func safetensorsHeader(names []string, elems int) []byte {
	var hdr bytes.Buffer
	hdr.WriteString("{")
	for i, name := range names {
		if i > 0 {
			hdr.WriteString(",")
		}
		fmt.Fprintf(&hdr, "%q:{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%d,%d]}", name, elems, i*4*elems, (i+1)*4*elems)
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteString(" ")
	}
	return append(binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len())), hdr.Bytes()...)
}

func xattr(t *testing.T, name, attr string) string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(name, "user.ckptfs."+attr, buf)
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", name, attr, err)
	}
	return string(buf[:n])
}

// TestMmapSaveAfterRename saves as safetensors' save_file does: create a
// temporary file, ftruncate it to its final size, rename it, then fill it
// through a shared mapping (the bytes arrive as page writebacks).
func TestMmapSaveAfterRename(t *testing.T) {
	m := newTestMount(t)
	for k, data := range safetensorsSeries(3) {
		dir := m.path(fmt.Sprintf("checkpoint-%d", 10*(k+1)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, final := dir+"/.tmpXq"+fmt.Sprint(k), dir+"/model.safetensors"
		mmapSaveInChild(t, tmp, final, data)
		wantContent(t, final, data)
		if got := xattr(t, final, "ingest"); got != "stream" {
			t.Errorf("save %d: ingest %q, want stream", k, got)
		}
		if k > 0 {
			want := fmt.Sprintf("checkpoint-%d/model.safetensors", 10*k)
			if got := xattr(t, final, "ref_path"); got != want {
				t.Errorf("save %d: ref_path %q (%s), want %q", k, got, xattr(t, final, "ref_reason"), want)
			}
		}
	}
}

// mmapSaveInChild runs the save in a child process (this test binary, see
// TestMmapSaveChild): a process that serves a FUSE mount must not write to
// it through a mapping itself, or the page faults and writebacks the kernel
// sends to the server can wait on the very process (its garbage collector
// stops every thread) that must answer them.
func mmapSaveInChild(t *testing.T, tmp, final string, data []byte) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runChildTest(t, "TestMmapSaveChild", "CKPTFS_MMAP_SAVE="+src+"\n"+tmp+"\n"+final)
}

// runChildTest runs test in a child process of this test binary with env
// (KEY=value) added, and fails unless the child ran it and it passed (a
// child that only skipped, or matched no test, fails too).
func runChildTest(t *testing.T, test, env string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a child process: %v\n%s", test, err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+test+" ")) {
		t.Fatalf("%s in a child process did not pass:\n%s", test, out)
	}
}

// TestMmapSaveChild is the child of mmapSaveInChild: create tmp, ftruncate
// it to the source's size, rename it to final, fill it through a shared
// mapping, msync, unmap, close.
func TestMmapSaveChild(t *testing.T) {
	args := strings.Split(os.Getenv("CKPTFS_MMAP_SAVE"), "\n")
	if len(args) != 3 {
		t.Skip("SKIPPED: the child process of mmapSaveInChild (TestMmapSaveAfterRename and TestWritePatterns start it with CKPTFS_MMAP_SAVE set): nothing to do on its own")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(args[1], os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(args[1], args[2]); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, data)
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRewriteWithOTrunc saves to the same name each time, as
// torch.save("last.pt") and Lightning's last.ckpt do: the kernel sends
// O_TRUNC as a truncate to 0 of the open file, and each save must be coded
// against the file's own previous content.
func TestRewriteWithOTrunc(t *testing.T) {
	m := newTestMount(t)
	name := m.path("last.pt")
	var prev string
	for k, data := range safetensorsSeries(3) {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		wantContent(t, name, data)
		if got := xattr(t, name, "ingest"); got != "stream" {
			t.Errorf("save %d: ingest %q, want stream", k, got)
		}
		if k > 0 {
			if got, why := xattr(t, name, "reference"), xattr(t, name, "ref_reason"); got != prev || why != "same-file" {
				t.Errorf("save %d: reference %s (%s), want %s (same-file)", k, got, why, prev)
			}
		}
		prev = xattr(t, name, "version")
	}
}

// TestListingDoesNotWaitOnCommit: while a large file's commit encodes in
// the background (192 MiB of random bytes rewritten in place), listing its
// directory and stat of the file answer at once with its new size. They
// once waited for the whole commit (the file's lock was held while it
// encoded), so `ls -l` hung for as long as `truncate -s 64G` ran when holes
// were still encoded.
func TestListingDoesNotWaitOnCommit(t *testing.T) {
	backend := &gatedBackend{Backend: memstore.New(4096, 128<<10)}
	m := newTestMountOn(t, backend)
	name := m.path("big")
	const size = 192 << 20
	data := make([]byte, size)
	rand.New(rand.NewSource(9)).Read(data)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, size+10); err != nil { // in place, and it grows
		t.Fatal(err)
	}
	open := backend.shut()
	if err := f.Close(); err != nil {
		open()
		t.Fatal(err)
	}
	waitCommitsStarted(t, m, 1)
	listed := async(func() error {
		if _, err := os.ReadDir(m.dir); err != nil {
			return err
		}
		if st := statT(t, name); st.Size != size+11 {
			t.Errorf("stat during the commit: size %d, want %d", st.Size, size+11)
		}
		return nil
	})
	select {
	case err := <-listed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the listing and stat waited for the commit")
	}
	open()
	m.fsys.Drain()
	wantSize(t, name, size+11)
}

package chain

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// patchZip flips bytes inside every stored member of archive b, computes
// the members' CRCs as a re-coding would (chunks of chunk bytes, in order),
// applies the patches, and checks that archive/zip reads every member back
// with its checksum verified.
func patchZip(t *testing.T, b []byte, chunk int) {
	t.Helper()
	readAt := bytesReadAt(b)
	members, err := zipMembers(readAt, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(members) == 0 {
		t.Fatal("no stored member found")
	}
	out := append([]byte(nil), b...)
	rng := rand.New(rand.NewSource(int64(len(b))))
	for _, m := range members {
		if m.size > 0 {
			out[m.data+rng.Int63n(m.size)] ^= 0x5a
		}
	}
	z := newZipCRCs(members)
	for off := 0; off < len(out); off += chunk {
		end := min(len(out), off+chunk)
		if off%(3*chunk) == 0 && bytes.Count(out[off:end], []byte{0}) == end-off {
			z.observe(int64(off), nil, int64(end-off))
		} else {
			z.observe(int64(off), out[off:end], int64(end-off))
		}
	}
	ps := z.patches()
	if len(ps) < 2*len(members) {
		t.Fatalf("%d patches for %d changed members", len(ps), len(members))
	}
	for _, p := range ps {
		applyPatch(out, 0, p)
	}
	r, err := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatalf("%s after the patch: %v", f.Name, err)
		}
		rc.Close()
	}
	// Without the patches the same reads fail: the test can fail.
	unpatched := append([]byte(nil), out...)
	for _, m := range members {
		for _, at := range m.crcAt {
			copy(unpatched[at:], b[at:at+4])
		}
	}
	r, _ = zip.NewReader(bytes.NewReader(unpatched), int64(len(unpatched)))
	failed := false
	for _, f := range r.File {
		rc, _ := f.Open()
		if _, err := io.Copy(io.Discard, rc); errors.Is(err, zip.ErrChecksum) {
			failed = true
		}
		rc.Close()
	}
	if !failed {
		t.Fatal("changed members read back without a checksum error before the patch")
	}
}

// bytesReadAt reads b for zipMembers.
func bytesReadAt(b []byte) func(p []byte, off int64) error {
	return func(p []byte, off int64) error {
		if off < 0 || off+int64(len(p)) > int64(len(b)) {
			return io.ErrUnexpectedEOF
		}
		copy(p, b[off:])
		return nil
	}
}

func TestZipCRCPatchGoWriter(t *testing.T) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	rng := rand.New(rand.NewSource(1))
	for i, n := range []int{5000, 70000, 300, 1 << 20} {
		f, err := w.CreateHeader(&zip.FileHeader{Name: "archive/data/" + string(rune('a'+i)), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(randomBytes(rng, n))
	}
	w.Close()
	patchZip(t, buf.Bytes(), 64<<10) // data descriptors: Go's writer streams
}

func TestZipCRCPatchTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "encode", "detect", "testdata", "golden", "ckpt-1.pt"))
	if err != nil {
		t.Fatal(err)
	}
	patchZip(t, b, 4096)
}

func TestZipMembersRefusesNonZip(t *testing.T) {
	b := randomBytes(rand.New(rand.NewSource(2)), 100000)
	if _, err := zipMembers(bytesReadAt(b), int64(len(b))); !errors.Is(err, errNotZip) {
		t.Fatalf("random bytes: %v, want errNotZip", err)
	}
}

// FuzzZipMembers: whatever the bytes, zipMembers returns members inside
// the file, in order and apart, or an error; it never panics.
func FuzzZipMembers(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "encode", "detect", "testdata", "golden", "ckpt-1.pt")); err == nil {
		f.Add(b)
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	fw, _ := w.CreateHeader(&zip.FileHeader{Name: "x", Method: zip.Store})
	fw.Write([]byte("hello, zip"))
	w.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		readAt := bytesReadAt(b)
		ms, err := zipMembers(readAt, int64(len(b)))
		if err != nil {
			return
		}
		for i, m := range ms {
			if m.data < 0 || m.size < 0 || m.data+m.size > int64(len(b)) {
				t.Fatalf("member %d [%d,+%d) outside %d bytes", i, m.data, m.size, len(b))
			}
			if i > 0 && m.data < ms[i-1].data+ms[i-1].size {
				t.Fatalf("members %d and %d overlap", i-1, i)
			}
			for _, at := range m.crcAt {
				if at < 0 || at+4 > int64(len(b)) {
					t.Fatalf("member %d: CRC field at %d outside the file", i, at)
				}
			}
		}
	})
}

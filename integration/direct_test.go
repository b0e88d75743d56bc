package integration

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirectWrites saves a file with O_DIRECT as dd oflag=direct does:
// aligned blocks, then fcntl(F_SETFL) clears O_DIRECT and the unaligned
// last block is written through the page cache. In passthrough mode that
// last write failed with EINVAL (the kernel's backing file kept the
// O_DIRECT of the open). Also: a second, buffered handle writing the tail
// while the O_DIRECT one is open (writers that keep one descriptor of each),
// and an O_DIRECT open joining a buffered writer's passthrough handle. Both
// save modes; every byte read back must equal what was written.
func TestDirectWrites(t *testing.T) {
	const block = 1 << 20
	data := make([]byte, 30*block+716_928)
	rand.New(rand.NewSource(7)).Read(data)
	aligned := alignedBuffer(t, block)
	inEachSaveMode(t, func(t *testing.T, flags ...string) {
		m := newMount(t, flags...)
		full := len(data) / block * block

		// dd oflag=direct.
		path := filepath.Join(m.dir, "dd.pt")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_DIRECT, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < full; off += block {
			copy(aligned, data[off:off+block])
			if _, err := f.Write(aligned); err != nil {
				t.Fatalf("O_DIRECT write at %d: %v", off, err)
			}
		}
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unix.O_DIRECT); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data[full:]); err != nil {
			t.Fatalf("the unaligned last block after clearing O_DIRECT: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		checkContent(t, path, data)

		// An O_DIRECT descriptor for the aligned part, a buffered one for the tail.
		path = filepath.Join(m.dir, "two.pt")
		d, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_DIRECT, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteAt(data[full:], int64(full)); err != nil {
			t.Fatal(err)
		}
		writeAligned(t, d, data[:full], aligned, "beside a buffered handle")
		if err := errors.Join(d.Close(), b.Close()); err != nil {
			t.Fatal(err)
		}
		checkContent(t, path, data)

		// A buffered writer first, then an O_DIRECT one (aligned writes).
		path = filepath.Join(m.dir, "join.pt")
		b, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteAt(data[full:], int64(full)); err != nil {
			t.Fatal(err)
		}
		d, err = os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatalf("O_DIRECT open beside a buffered writer: %v", err)
		}
		writeAligned(t, d, data[:full], aligned, "after a buffered writer")
		if err := errors.Join(d.Close(), b.Close()); err != nil {
			t.Fatal(err)
		}
		checkContent(t, path, data)

		m.restart()
		for _, name := range []string{"dd.pt", "two.pt", "join.pt"} {
			checkContent(t, filepath.Join(m.dir, name), data)
		}
		m.stop()
		fsck(t, m.store)
	})
}

// alignedBuffer is n bytes at a page boundary, as O_DIRECT wants.
func alignedBuffer(t *testing.T, n int) []byte {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

func checkContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read back %d bytes, wrote %d; first difference at %d", path, len(got), len(want), firstDiff(got, want))
	}
}

// writeAligned writes data through the O_DIRECT file d from offset 0, a
// block of len(aligned) at a time, copied into the aligned buffer.
func writeAligned(t *testing.T, d *os.File, data, aligned []byte, what string) {
	t.Helper()
	for off := 0; off < len(data); off += len(aligned) {
		copy(aligned, data[off:off+len(aligned)])
		if _, err := d.WriteAt(aligned, int64(off)); err != nil {
			t.Fatalf("O_DIRECT write at %d %s: %v", off, what, err)
		}
	}
}

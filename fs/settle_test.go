package fs

import (
	"bytes"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/staging"
)

// appendLines appends lines [from, to) to name, opening and closing it for
// each, as a training's log is written; it returns what it appended.
func appendLines(t *testing.T, name string, from, to int) []byte {
	t.Helper()
	var all []byte
	for i := from; i < to; i++ {
		line := []byte(fmt.Sprintf("step %d loss %.6f\n", i, 1/float64(i+1)))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		all = append(all, line...)
	}
	return all
}

// committedContent is the inode's committed content, read from the store
// (no wait for a pending commit, as the attributes would).
func (m *testMount) committedContent(ino chain.Ino) (chain.VersionID, []byte) {
	m.t.Helper()
	var err error
	for try := 0; try < 10; try++ { // a commit landing meanwhile frees the version read
		var info *chain.FileInfo
		if info, err = m.fsys.store.Info(ino); err != nil || info == nil {
			m.t.Fatalf("info of inode %d: %v", ino, err)
		}
		var r *chain.Reader
		if r, err = m.fsys.store.OpenVersion(info.Version); err != nil {
			continue
		}
		var data []byte
		if data, err = io.ReadAll(io.NewSectionReader(r, 0, r.Size())); err == nil {
			return info.Version, data
		}
	}
	m.t.Fatalf("committed content of inode %d: %v", ino, err)
	return 0, nil
}

// stagingEntries are the staging files of inode ino that hold its content
// (not one kept only as the kernel's backing file, done).
func (m *testMount) stagingEntries(ino chain.Ino) []staging.Entry {
	m.t.Helper()
	var out []staging.Entry
	for _, e := range m.stagingList() {
		if chain.Ino(e.Ino) == ino && e.State != staging.Done {
			out = append(out, e)
		}
	}
	return out
}

func (m *testMount) stagingFiles(ino chain.Ino) int { return len(m.stagingEntries(ino)) }

// stagingList is every file in the staging directory.
func (m *testMount) stagingList() []staging.Entry {
	m.t.Helper()
	dir, err := m.fsys.stagingDir()
	if err != nil {
		m.t.Fatal(err)
	}
	entries, err := dir.List()
	if err != nil {
		m.t.Fatal(err)
	}
	return entries
}

// TestHotFileSettles: a log appended line by line (open, append, close) is
// not encoded whole at every close: each open takes the staging file of the
// previous close over, so the lines cost no commit each; the file reads
// right meanwhile, and its commit lands once nobody writes it for
// settleQuiet, or at once when something waits for it (the report's Drain,
// the user.ckptfs.* attributes).
func TestHotFileSettles(t *testing.T) {
	for _, daemonWritten := range []bool{false, true} {
		t.Run(fmt.Sprintf("daemonWritten=%v", daemonWritten), func(t *testing.T) {
			m := newTestMountMode(t, nil, daemonWritten)
			name := m.path("log.txt")
			want := randomBytes(7, 2<<20)
			writePieces(t, name, want)
			m.fsys.Drain()
			ino := chain.Ino(statT(t, name).Ino)
			v0, _ := m.committedContent(ino)

			want = append(want, appendLines(t, name, 0, 200)...)
			wantContent(t, name, want) // served from the staging file
			v1, data := m.committedContent(ino)
			// The first reopen may find the commit before it landed long
			// ago: at most it and one more commit ran, not 200.
			if v1-v0 > 2 {
				t.Errorf("200 appends made %d commits; want them to settle first", v1-v0)
			}
			if bytes.Equal(data, want) {
				t.Errorf("the appends were committed at once; want them to settle first")
			}
			if n := m.stagingFiles(ino); n != 1 {
				t.Errorf("%d staging files, want the one the writers took over", n)
			}
			// A writer appending to the settling save keeps that save as
			// the file's first bytes in its record: a crash keeps it.
			held, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := held.Write([]byte("not closed yet\n")); err != nil {
				t.Fatal(err)
			}
			if e := m.stagingEntries(ino); len(e) != 1 || e[0].State != staging.Appending || e[0].Keep != int64(len(want)) {
				t.Errorf("staging files %+v while appending, want one keeping the %d bytes closed", e, len(want))
			}
			if err := held.Close(); err != nil {
				t.Fatal(err)
			}
			want = append(want, "not closed yet\n"...)

			// Quiet: it lands on its own.
			deadline := time.Now().Add(settleQuiet + 10*time.Second)
			for {
				if _, data = m.committedContent(ino); bytes.Equal(data, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the appends were not committed %v after the last", settleQuiet+10*time.Second)
				}
				time.Sleep(20 * time.Millisecond)
			}
			m.fsys.Drain()
			if n := m.stagingFiles(ino); n != 0 {
				t.Errorf("%d staging files after the commit, want none", n)
			}

			// The report's Drain does not wait for the quiet.
			want = append(want, appendLines(t, name, 200, 300)...)
			m.fsys.Drain()
			if _, data = m.committedContent(ino); !bytes.Equal(data, want) {
				t.Fatalf("after Drain the committed content is %d bytes, want %d", len(data), len(want))
			}

			// Nor do the computed attributes.
			want = append(want, appendLines(t, name, 300, 310)...)
			buf := make([]byte, 64)
			if _, err := syscall.Getxattr(name, infoPrefix+"version", buf); err != nil {
				t.Fatal(err)
			}
			if _, data = m.committedContent(ino); !bytes.Equal(data, want) {
				t.Fatalf("after getxattr the committed content is %d bytes, want %d", len(data), len(want))
			}
			wantContent(t, name, want)
		})
	}
}

// TestHotFileTruncatedAndDeleted: a truncate of a settling file commits it
// first and then cuts it; a settling file deleted and no longer open is
// never committed, and its staging file goes.
func TestHotFileTruncatedAndDeleted(t *testing.T) {
	m := newTestMount(t)
	name := m.path("metrics.csv")
	if err := os.WriteFile(name, []byte("step,loss\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("step,loss\n"), appendLines(t, name, 0, 50)...)
	if err := os.Truncate(name, 20); err != nil {
		t.Fatal(err)
	}
	wantContent(t, name, want[:20])
	ino := chain.Ino(statT(t, name).Ino)
	m.fsys.Drain()
	if _, data := m.committedContent(ino); !bytes.Equal(data, want[:20]) {
		t.Fatalf("committed %q, want %q", data, want[:20])
	}

	appendLines(t, name, 50, 100)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	m.fsys.Drain()
	if n := m.stagingFiles(ino); n != 0 {
		t.Errorf("%d staging files of a deleted file, want none", n)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("stat of the deleted file: %v", err)
	}
}

// BenchmarkAppendLine: a line appended to a 10 MiB log, opened and closed
// around it, into a plain directory and into a mount, side by side (go test
// -bench AppendLine ./fs/). Before appends settled, the mount's cost grew
// with the log (the log was encoded whole at every close).
func BenchmarkAppendLine(b *testing.B) {
	line := []byte("step 000000 loss 0.123456 lr 0.000100 grad_norm 1.234567\n")
	run := func(b *testing.B, dir string) {
		name := dir + "/log.txt"
		if err := os.WriteFile(name, randomBytes(3, 10<<20), 0o644); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(line)))
		b.ResetTimer()
		for range b.N {
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("mount", func(b *testing.B) {
		m := newTestMount(b)
		run(b, m.dir)
		b.StopTimer()
		m.fsys.Drain()
	})
}

// survivesCrash reports whether save, closed, would be inode ino's content
// after a crash now: committed, or a staging file's closed save (recovery
// ingests it).
func (m *testMount) survivesCrash(ino chain.Ino, save []byte) bool {
	m.t.Helper()
	if _, data := m.committedContent(ino); bytes.Equal(data, save) {
		return true
	}
	for _, data := range m.stagedSaves(ino) {
		if bytes.Equal(data, save) {
			return true
		}
	}
	return false
}

// recoveryKeeps is what the store's next open would make inode ino's
// content after a crash now: a staging file's closed save is ingested over
// the committed content.
func (m *testMount) recoveryKeeps(ino chain.Ino) []byte {
	m.t.Helper()
	saves := m.stagedSaves(ino)
	switch len(saves) {
	case 0:
		_, data := m.committedContent(ino)
		return data
	case 1:
		return saves[0]
	}
	m.t.Fatalf("%d staging files hold closed saves of inode %d", len(saves), ino)
	return nil
}

// stagedSaves are the closed saves inode ino's staging files hold: a
// closed file whole, one being appended to its first Keep bytes.
func (m *testMount) stagedSaves(ino chain.Ino) [][]byte {
	m.t.Helper()
	var saves [][]byte
	for _, e := range m.stagingEntries(ino) {
		if e.State != staging.Closed && e.State != staging.Appending {
			continue
		}
		data, err := os.ReadFile(e.Path)
		if err != nil {
			m.t.Fatal(err)
		}
		if e.State == staging.Appending && int64(len(data)) >= e.Keep {
			data = data[:e.Keep]
		}
		saves = append(saves, data)
	}
	return saves
}

// closeMapped writes save into name (O_TRUNC) and closes it, its release
// held back by a mapping, so that its commit has not run when the next
// writer opens it; it returns the munmap.
func closeMapped(t *testing.T, name string, save []byte) func() {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(save); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(save), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return func() { syscall.Munmap(mem) }
}

// TestReopenKeepsClosedSave: a file closed by its last writer whose release
// has not come (a mapping holds it where the daemon serves the file) and
// which a writer opens again: the closed save must survive a crash while
// the new writer has the file. One that truncates has it committed first;
// one that appends keeps it as the staging file's first bytes
// (staging.Appending).
func TestReopenKeepsClosedSave(t *testing.T) {
	for _, daemonWritten := range []bool{false, true} {
		t.Run(fmt.Sprintf("daemonWritten=%v", daemonWritten), func(t *testing.T) {
			m := newTestMountMode(t, nil, daemonWritten)
			name := m.path("state.bin")
			writePieces(t, name, randomBytes(1, 1<<20))
			m.fsys.Drain()
			ino := chain.Ino(statT(t, name).Ino)

			closeMapped := func(save []byte) func() { return closeMapped(t, name, save) }

			saved := randomBytes(2, 1<<20)
			unmap := closeMapped(saved)
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !m.survivesCrash(ino, saved) {
				t.Errorf("a truncating writer opened it: a crash would lose the closed save")
			}
			if _, err := f.Write([]byte("next")); err != nil {
				t.Fatal(err)
			}
			f.Close()
			unmap()

			saved = randomBytes(3, 1<<20)
			unmap = closeMapped(saved)
			f, err = os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("appended")); err != nil {
				t.Fatal(err)
			}
			if !m.survivesCrash(ino, saved) {
				t.Errorf("staging files %+v while appending: a crash would lose the closed save", m.stagingEntries(ino))
			}
			f.Close()
			unmap()
			m.fsys.Drain()
			wantContent(t, name, append(saved, "appended"...))
		})
	}
}

// TestAppendingWriterKeepsClosedSave: a writer that appends takes a closed
// save over as the staging file's first bytes; a change of those bytes
// through it (fallocate, which may zero or punch any range), or through a
// mapping of a handle that may map them (O_RDWR), must not leave a crash
// with neither the save nor the content before it (make stress, kill
// trial 740161: fallocate zeroed part of the save, and the file came back
// empty).
func TestAppendingWriterKeepsClosedSave(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  int
		change func(t *testing.T, f *os.File)
		// mapped: the change writes through a mapping, which only a
		// passthrough mount serves without the daemon (a page fault on
		// this process's own daemon-written mount can deadlock it with
		// the garbage collector: randops.Runner.NoMmap).
		mapped bool
	}{
		{name: "fallocate through O_WRONLY|O_APPEND", flags: os.O_WRONLY | os.O_APPEND, change: func(t *testing.T, f *os.File) {
			const zeroRangeKeepSize = 0x10 | 0x1
			if err := syscall.Fallocate(int(f.Fd()), zeroRangeKeepSize, 4096, 16384); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "mmap write through O_RDWR|O_APPEND", flags: os.O_RDWR | os.O_APPEND, mapped: true, change: func(t *testing.T, f *os.File) {
			mem, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			copy(mem[100:], "not closed, not synced") // in the staging file's pages now
			syscall.Munmap(mem)
		}},
	} {
		for _, daemonWritten := range []bool{false, true} {
			if tc.mapped && daemonWritten {
				continue
			}
			t.Run(fmt.Sprintf("%s/daemonWritten=%v", tc.name, daemonWritten), func(t *testing.T) {
				m := newTestMountMode(t, nil, daemonWritten)
				if tc.mapped && !m.fsys.PassthroughOn() {
					t.Skip("!! SKIPPED: no FUSE passthrough on this kernel")
				}
				name := m.path("state.bin")
				writePieces(t, name, randomBytes(1, 1<<20))
				m.fsys.Drain()
				ino := chain.Ino(statT(t, name).Ino)
				saved := randomBytes(2, 1<<20)
				unmap := closeMapped(t, name, saved)
				g, err := os.OpenFile(name, tc.flags, 0)
				if err != nil {
					t.Fatal(err)
				}
				tc.change(t, g)
				if !m.survivesCrash(ino, saved) {
					t.Errorf("staging files %+v: a crash would lose the closed save", m.stagingEntries(ino))
				}
				g.Close()
				unmap()
				m.fsys.Drain()
			})
		}
	}
}

// TestMappedAppenderCommitsClosedSave: a closed save whose commit is still
// pending (an appending writer opened and closed it since), then a writer
// opening O_RDWR|O_APPEND and writing through a mapping. The open commits
// the save; the staging file must then no longer claim its first bytes as
// a closed save, or a crash would bring back the mapping's bytes that no
// one closed or synced (make stress, trial 770042, passthrough).
func TestMappedAppenderCommitsClosedSave(t *testing.T) {
	m := newTestMountMode(t, nil, false)
	if !m.fsys.PassthroughOn() {
		t.Skip("!! SKIPPED: no FUSE passthrough on this kernel")
	}
	name := m.path("c.npy")
	saved := randomBytes(3, 322568)
	writePieces(t, name, saved)
	ino := chain.Ino(statT(t, name).Ino)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Write(randomBytes(4, 16384)); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(g.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "not closed, not synced")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	syscall.Munmap(mem)
	if got := m.recoveryKeeps(ino); !bytes.Equal(got, saved) {
		n := 0
		for n < min(len(got), len(saved)) && got[n] == saved[n] {
			n++
		}
		t.Errorf("staging files %+v: a crash would keep %d bytes (first difference at %d), not the closed save",
			m.stagingEntries(ino), len(got), n)
	}
}

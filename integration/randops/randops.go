// Package randops runs seeded sequences of file operations against a
// filesystem under test and a reference directory side by side, and
// compares every answer: errors, bytes read, sizes and listings. The same
// sequences drive ckptfs in process (fs tests) and the binary
// (integration tests); a failing sequence shrinks to a short one, printed
// as a Go literal to paste into a regression test.
//
// A sequence works in one directory of its own, so that several run at
// once in one mount without a reference for their interleavings: what is
// shared between them is the daemon (its commits, allocator, caches),
// which is what the concurrency is for.
package randops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is an operation.
type Kind uint8

const (
	Open        Kind = iota // Slot: Path opened with Flags (a file open in Slot is closed first)
	Close                   // Slot closed
	Pwrite                  // Len bytes at Off through Slot
	Write                   // Len bytes at the handle's offset (the end with O_APPEND)
	Pread                   // Len bytes at Off through Slot
	Ftruncate               // Slot truncated to Off
	Truncate                // Path truncated to Off
	Fsync                   // Slot
	Fdatasync               // Slot
	MmapWrite               // Len bytes at Off through a shared mapping of Slot
	Fallocate               // Slot, mode Flags, [Off, Off+Len)
	CopyRange               // copy_file_range of Len bytes from Slot at Off to Slot2 at Off2
	Sendfile                // sendfile of Len bytes from Slot at Off to Slot2
	Rename                  // Path to Path2, renameat2 flags Flags
	Link                    // Path to Path2
	Unlink                  // Path
	Mkdir                   // Path
	Rmdir                   // Path
	Setxattr                // Path, attribute Flags, Len bytes of value
	Removexattr             // Path, attribute Flags
	Save                    // Path rewritten whole (O_TRUNC) in pieces, Len bytes, closed
	ReadFile                // Path read whole through a new open
	kinds
)

var kindNames = [...]string{"Open", "Close", "Pwrite", "Write", "Pread", "Ftruncate", "Truncate", "Fsync",
	"Fdatasync", "MmapWrite", "Fallocate", "CopyRange", "Sendfile", "Rename", "Link", "Unlink", "Mkdir",
	"Rmdir", "Setxattr", "Removexattr", "Save", "ReadFile"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Op is one operation. Written bytes are a function of Seed, Len and
// Tensor: a float32 .npy array that drifts a little from seed to seed
// (so that the store codes saves as deltas and builds chains), or random
// bytes.
type Op struct {
	Kind        Kind
	Slot, Slot2 int
	Path, Path2 string
	Off, Off2   int64
	Len         int64
	Flags       int
	Seed        int64
	Tensor      bool
}

// GoString prints the op as a Go literal of this package.
func (o Op) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Kind: randops.%s", o.Kind)
	field := func(name string, v any, zero bool) {
		if !zero {
			fmt.Fprintf(&b, ", %s: %#v", name, v)
		}
	}
	field("Slot", o.Slot, o.Slot == 0)
	field("Slot2", o.Slot2, o.Slot2 == 0)
	field("Path", o.Path, o.Path == "")
	field("Path2", o.Path2, o.Path2 == "")
	field("Off", o.Off, o.Off == 0)
	field("Off2", o.Off2, o.Off2 == 0)
	field("Len", o.Len, o.Len == 0)
	field("Flags", o.Flags, o.Flags == 0)
	field("Seed", o.Seed, o.Seed == 0)
	field("Tensor", o.Tensor, !o.Tensor)
	b.WriteString("}")
	return b.String()
}

// Format prints ops as a Go slice literal.
func Format(ops []Op) string {
	var b strings.Builder
	b.WriteString("[]randops.Op{\n")
	for _, o := range ops {
		fmt.Fprintf(&b, "\t%#v,\n", o)
	}
	b.WriteString("}")
	return b.String()
}

// Slots is how many handles a sequence keeps open at once.
const Slots = 4

// The tree a sequence works in: names that collide often.
var (
	files = []string{"a", "b", "c.npy", "d0/e", "d0/f.npy", "d0/d1/g", "d2/h.npy"}
	dirs  = []string{"d0", "d0/d1", "d2", "d3"}
	names = append(append([]string{}, files...), dirs...)
)

// Dirs are the directories a sequence's root starts with.
func Dirs() []string { return []string{"d0", "d0/d1", "d2"} }

var openFlags = []int{
	os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_TRUNC,
	os.O_RDWR | os.O_CREATE | os.O_TRUNC, os.O_WRONLY | os.O_APPEND | os.O_CREATE, os.O_RDWR | os.O_APPEND,
	os.O_RDWR | os.O_CREATE | os.O_EXCL,
}

// fallocModes are the modes a FUSE filesystem can be asked for: the kernel
// refuses collapse and insert (EOPNOTSUPP) before the daemon sees them.
var fallocModes = []int{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_ZERO_RANGE,
	unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE}

var renameFlags = []int{0, 0, 0, unix.RENAME_NOREPLACE, unix.RENAME_EXCHANGE}

// Generate returns n operations drawn from seed.
func Generate(seed int64, n int) []Op {
	rng := rand.New(rand.NewSource(seed))
	pick := func(list []string) string { return list[rng.Intn(len(list))] }
	offset := func() int64 {
		switch rng.Intn(4) {
		case 0:
			return 0
		case 1:
			return int64(rng.Intn(8)) * 4096 // block-aligned
		default:
			return rng.Int63n(1 << 20)
		}
	}
	length := func() int64 {
		switch rng.Intn(5) {
		case 0:
			return 1 + rng.Int63n(100)
		case 1:
			return 4096 * (1 + rng.Int63n(4))
		case 2:
			return rng.Int63n(300_000)
		default:
			return rng.Int63n(70_000)
		}
	}
	ops := make([]Op, 0, n)
	for len(ops) < n {
		o := Op{Slot: rng.Intn(Slots), Slot2: rng.Intn(Slots), Seed: rng.Int63n(1 << 30)}
		switch r := rng.Intn(100); {
		case r < 12:
			o.Kind, o.Path, o.Flags = Open, pick(files), openFlags[rng.Intn(len(openFlags))]
		case r < 18:
			o.Kind = Close
		case r < 30:
			o.Kind, o.Off, o.Len = Pwrite, offset(), length()
		case r < 35:
			o.Kind, o.Len = Write, length()
		case r < 43:
			o.Kind, o.Off, o.Len = Pread, offset(), length()
		case r < 46:
			o.Kind, o.Off = Ftruncate, offset()
		case r < 48:
			o.Kind, o.Path, o.Off = Truncate, pick(files), offset()
		case r < 50:
			o.Kind = Fsync
		case r < 51:
			o.Kind = Fdatasync
		case r < 54:
			o.Kind, o.Off, o.Len = MmapWrite, offset(), length()
		case r < 58:
			o.Kind, o.Flags, o.Off, o.Len = Fallocate, fallocModes[rng.Intn(len(fallocModes))], offset(), 4096*(1+rng.Int63n(16))
		case r < 60:
			o.Kind, o.Off, o.Off2, o.Len = CopyRange, offset(), offset(), length()
		case r < 61:
			o.Kind, o.Off, o.Len = Sendfile, offset(), length()
		case r < 66:
			o.Kind, o.Path, o.Path2, o.Flags = Rename, pick(names), pick(names), renameFlags[rng.Intn(len(renameFlags))]
		case r < 68:
			o.Kind, o.Path, o.Path2 = Link, pick(files), pick(files)
		case r < 72:
			o.Kind, o.Path = Unlink, pick(files)
		case r < 73:
			o.Kind, o.Path = Mkdir, pick(dirs)
		case r < 74:
			o.Kind, o.Path = Rmdir, pick(dirs)
		case r < 76:
			o.Kind, o.Path, o.Flags, o.Len = Setxattr, pick(names), rng.Intn(3), rng.Int63n(200)
		case r < 77:
			o.Kind, o.Path, o.Flags = Removexattr, pick(names), rng.Intn(3)
		case r < 90:
			o.Kind, o.Path = Save, pick(files)
			o.Tensor = strings.HasSuffix(o.Path, ".npy") || rng.Intn(4) == 0
			o.Len = 1 + rng.Int63n(600_000)
		default:
			o.Kind, o.Path = ReadFile, pick(files)
		}
		ops = append(ops, o)
	}
	return ops
}

// Payload is the bytes an op writes.
func Payload(o Op) []byte {
	if o.Len <= 0 {
		return nil
	}
	if o.Tensor {
		return npy(o.Path, o.Seed, o.Len)
	}
	b := make([]byte, o.Len)
	rand.New(rand.NewSource(o.Seed)).Read(b)
	return b
}

// npy is a float32 .npy file of about n bytes: weights fixed by the name,
// plus a small drift by seed, as consecutive checkpoints of a training.
func npy(name string, seed, n int64) []byte {
	elems := max(1, (n-128)/4)
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", elems)
	pad := 64 - (10+len(hdr)+1)%64
	hdr += strings.Repeat(" ", pad) + "\n"
	out := make([]byte, 0, 10+len(hdr)+int(elems)*4)
	out = append(out, "\x93NUMPY\x01\x00"...)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(hdr)))
	out = append(out, hdr...)
	var h int64
	for _, c := range name {
		h = h*31 + int64(c)
	}
	base := rand.New(rand.NewSource(h))
	drift := rand.New(rand.NewSource(seed))
	for i := int64(0); i < elems; i++ {
		w := float32(base.NormFloat64()*0.02) * (1 + float32(drift.NormFloat64()*1e-3))
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(w))
	}
	return out
}

// Mismatch is a difference between the filesystem under test and the
// reference.
type Mismatch struct {
	Step int
	Op   Op
	What string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("step %d %#v: %s", m.Step, m.Op, m.What)
}

// side is one of the two trees.
type side struct {
	root  string
	slots [Slots]*os.File
}

// Runner applies operations to the tree under test (0) and the reference (1).
type Runner struct {
	sides [2]side
	step  int
	// Writers, when set, is told of each open for writing (with the
	// reference file's content before it) and of its close (with the
	// content then), and Synced of
	// each fsync, fdatasync and msync, through any handle (with the
	// content then), by the reference's inode: the kill test's record of
	// what a file may hold when its daemon dies.
	Writers func(ino uint64, before []byte, opened bool)
	Synced  func(ino uint64, content []byte)
	// writable marks the reference's slots opened for writing.
	writable [Slots]bool
	// NoMmap makes MmapWrite do nothing on either side. A test process
	// that serves the mount itself sets it: a page fault on its own mount
	// waits for the daemon while holding a Go processor that a collection's
	// stop-the-world waits for, and the daemon's goroutines, stopped too,
	// never answer (make stress hung so in fs.TestRandomOps).
	NoMmap bool
	// View, when set, is the directory that shows the tree under test at
	// reduced precision (ckptfs's .ckptfs/view/bf16/ of root): each check
	// of the trees also reads every regular file there, when no handle is
	// open for writing, and fails unless it differs from the file only by
	// zeroed bytes (the low bytes of float32 values cut to bfloat16), so
	// that a view never shows a version the file no longer has. The check
	// first waits out the kernel's entries of the view (viewEntryLife).
	View string
}

// NewRunner runs sequences in root (the filesystem under test) and ref,
// which it creates, with the sequence's starting directories.
func NewRunner(root, ref string) (*Runner, error) {
	r := &Runner{sides: [2]side{{root: root}, {root: ref}}}
	for _, s := range r.sides {
		for _, d := range append([]string{""}, Dirs()...) {
			if err := os.MkdirAll(filepath.Join(s.root, d), 0o755); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Roots returns the tree under test and the reference.
func (r *Runner) Roots() (string, string) { return r.sides[0].root, r.sides[1].root }

// Close closes every handle.
func (r *Runner) Close() {
	for i := range r.sides {
		for k, f := range r.sides[i].slots {
			if f != nil {
				f.Close()
				r.sides[i].slots[k] = nil
			}
		}
	}
}

// Forget closes every handle of both trees after the daemon of the tree
// under test was killed (its handles are dead), telling Writers nothing.
func (r *Runner) Forget() {
	for k, f := range r.sides[1].slots {
		if f != nil {
			f.Close()
		}
		r.sides[1].slots[k] = nil
		r.writable[k] = false
		if g := r.sides[0].slots[k]; g != nil {
			g.Close()
		}
		r.sides[0].slots[k] = nil
	}
}

// result is what one side answered.
type result struct {
	err  syscall.Errno
	n    int64
	data []byte
}

// Apply runs op on both trees and compares what they answered, then the
// sizes and contents of the paths it touched.
func (r *Runner) Apply(op Op) error {
	r.step++
	var res [2]result
	for i := range r.sides {
		res[i] = r.sides[i].apply(op, r, i)
	}
	a, b := res[0], res[1]
	if op.Kind == Fallocate && a.err == syscall.EOPNOTSUPP && b.err == 0 {
		// A mode the filesystem under test does not support: the
		// reference must not change either. Undo is impossible, so the
		// sequences do not draw modes ckptfs refuses; report it.
		return &Mismatch{r.step, op, "fallocate mode refused by the filesystem under test"}
	}
	if a.err != b.err {
		return &Mismatch{r.step, op, fmt.Sprintf("error %v, reference %v", errName(a.err), errName(b.err))}
	}
	if a.n != b.n {
		return &Mismatch{r.step, op, fmt.Sprintf("returned %d, reference %d", a.n, b.n)}
	}
	if !bytes.Equal(a.data, b.data) {
		return &Mismatch{r.step, op, fmt.Sprintf("read %d bytes, reference %d: %s", len(a.data), len(b.data), firstDiff(a.data, b.data))}
	}
	for _, p := range r.touched(op) {
		if err := r.comparePath(p); err != "" {
			return &Mismatch{r.step, op, err}
		}
	}
	return nil
}

// touched lists the paths an op may have changed.
func (r *Runner) touched(op Op) []string {
	var out []string
	for _, p := range []string{op.Path, op.Path2} {
		if p != "" {
			out = append(out, p)
		}
	}
	for _, k := range []int{op.Slot, op.Slot2} {
		if f := r.sides[1].slots[k]; f != nil {
			if rel, err := filepath.Rel(r.sides[1].root, f.Name()); err == nil {
				out = append(out, rel)
			}
		}
	}
	return out
}

// comparePath compares stat results and contents of p.
func (r *Runner) comparePath(p string) string {
	var st [2]unix.Stat_t
	var errs [2]error
	for i, s := range r.sides {
		errs[i] = unix.Lstat(filepath.Join(s.root, p), &st[i])
	}
	if errnoOf(errs[0]) != errnoOf(errs[1]) {
		return fmt.Sprintf("stat %s: %v, reference %v", p, errs[0], errs[1])
	}
	if errs[0] != nil {
		return ""
	}
	if st[0].Mode&unix.S_IFMT != st[1].Mode&unix.S_IFMT {
		return fmt.Sprintf("%s: type %o, reference %o", p, st[0].Mode&unix.S_IFMT, st[1].Mode&unix.S_IFMT)
	}
	if st[0].Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	if st[0].Size != st[1].Size || st[0].Nlink != st[1].Nlink {
		return fmt.Sprintf("stat %s: size %d nlink %d, reference size %d nlink %d", p, st[0].Size, st[0].Nlink, st[1].Size, st[1].Nlink)
	}
	var data [2][]byte
	for i, s := range r.sides {
		data[i], errs[i] = os.ReadFile(filepath.Join(s.root, p))
	}
	if errnoOf(errs[0]) != errnoOf(errs[1]) {
		return fmt.Sprintf("read %s: %v, reference %v", p, errs[0], errs[1])
	}
	if !bytes.Equal(data[0], data[1]) {
		return fmt.Sprintf("%s: content differs (%d bytes, reference %d): %s", p, len(data[0]), len(data[1]), firstDiff(data[0], data[1]))
	}
	return ""
}

// CompareTrees compares the two whole trees: listings, types, sizes,
// contents and xattrs.
func (r *Runner) CompareTrees() error {
	var lists [2][]string
	for i, s := range r.sides {
		err := filepath.Walk(s.root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(s.root, p)
			size := int64(0)
			if fi.Mode().IsRegular() {
				size = fi.Size()
			}
			lists[i] = append(lists[i], fmt.Sprintf("%s %v %d %s", rel, fi.Mode().Type(), size, xattrs(p)))
			return nil
		})
		if err != nil {
			return &Mismatch{r.step, Op{}, fmt.Sprintf("walk %s: %v", s.root, err)}
		}
		sort.Strings(lists[i])
	}
	if a, b := strings.Join(lists[0], "\n"), strings.Join(lists[1], "\n"); a != b {
		return &Mismatch{r.step, Op{}, fmt.Sprintf("trees differ:\n%s\nreference:\n%s", a, b)}
	}
	for _, line := range lists[1] {
		if err := r.comparePath(strings.Fields(line)[0]); err != "" {
			return &Mismatch{r.step, Op{}, err}
		}
	}
	if r.View == "" || slices.Contains(r.writable[:], true) {
		return nil
	}
	time.Sleep(viewEntryLife)
	for _, line := range lists[0] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == os.FileMode(0).String() {
			if err := r.compareView(f[0]); err != "" {
				return &Mismatch{r.step, Op{}, err}
			}
		}
	}
	return nil
}

// viewEntryLife outlasts the kernel's entries of a ckptfs view: one or two
// ticks of its clock (fs.viewChild), whatever its HZ.
const viewEntryLife = 25 * time.Millisecond

// compareView checks the view of the regular file p against the file.
func (r *Runner) compareView(p string) string {
	exact, err := os.ReadFile(r.sides[0].path(p))
	if err != nil {
		return fmt.Sprintf("read %s: %v", p, err)
	}
	view, err := os.ReadFile(filepath.Join(r.View, p))
	if err != nil {
		var a, b unix.Stat_t
		ea := unix.Lstat(r.sides[0].path(p), &a)
		eb := unix.Lstat(filepath.Join(r.View, p), &b)
		return fmt.Sprintf("read the view of %s: %v (the file: ino %d mode %o, %v; the view: ino %#x mode %o, %v)", p, err, a.Ino, a.Mode, ea, b.Ino, b.Mode, eb)
	}
	if len(view) != len(exact) {
		return fmt.Sprintf("the view of %s: %d bytes, the file %d", p, len(view), len(exact))
	}
	for i := range view {
		if view[i] != exact[i] && view[i] != 0 {
			return fmt.Sprintf("the view of %s: byte %d is %#x, the file's %#x: another version's", p, i, view[i], exact[i])
		}
	}
	return ""
}

func xattrs(p string) string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return ""
	}
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.rand") {
			continue // the filesystem's own (user.ckptfs.*) are not the reference's
		}
		v := make([]byte, 512)
		k, _ := unix.Lgetxattr(p, name, v)
		out = append(out, fmt.Sprintf("%s=%x", name, v[:max(k, 0)]))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (s *side) path(p string) string { return filepath.Join(s.root, p) }

func (s *side) apply(op Op, r *Runner, i int) (res result) {
	fail := func(err error) result { return result{err: errnoOf(err)} }
	slot := func(k int) (*os.File, bool) { return s.slots[k], s.slots[k] != nil }
	switch op.Kind {
	case Open:
		if f := s.slots[op.Slot]; f != nil {
			s.close(op.Slot, r, i)
		}
		writing := op.Flags&(os.O_WRONLY|os.O_RDWR) != 0
		var before []byte
		if i == 1 && writing && r.Writers != nil {
			before, _ = os.ReadFile(s.path(op.Path))
		}
		f, err := os.OpenFile(s.path(op.Path), op.Flags, 0o644)
		if err != nil {
			return fail(err)
		}
		s.slots[op.Slot] = f
		if i == 1 {
			r.writable[op.Slot] = writing
			if writing && r.Writers != nil {
				r.Writers(inoOf(f), before, true)
			}
		}
	case Close:
		if _, ok := slot(op.Slot); !ok {
			return result{err: unix.EBADF}
		}
		return fail(s.close(op.Slot, r, i))
	case Pwrite, Write:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		var n int
		var err error
		if op.Kind == Pwrite {
			n, err = unix.Pwrite(int(f.Fd()), Payload(op), op.Off)
		} else {
			n, err = unix.Write(int(f.Fd()), Payload(op))
		}
		return result{err: errnoOf(err), n: int64(n)}
	case Pread:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		b := make([]byte, op.Len)
		n, err := unix.Pread(int(f.Fd()), b, op.Off)
		return result{err: errnoOf(err), data: b[:max(n, 0)]}
	case Ftruncate:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		return fail(unix.Ftruncate(int(f.Fd()), op.Off))
	case Truncate:
		return fail(unix.Truncate(s.path(op.Path), op.Off))
	case Fsync, Fdatasync:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		var err error
		if op.Kind == Fsync {
			err = unix.Fsync(int(f.Fd()))
		} else {
			err = unix.Fdatasync(int(f.Fd()))
		}
		// fsync is the file's, whatever the handle: one through a
		// read-only handle makes the content its writers gave it
		// durable too, as on a plain filesystem (and ckptfs commits it).
		if i == 1 && err == nil && r.Synced != nil {
			r.Synced(inoOf(f), contentOf(f))
		}
		return fail(err)
	case MmapWrite:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		if r.NoMmap {
			return result{}
		}
		err := mmapWrite(f, op)
		if i == 1 && err == nil && r.Synced != nil {
			// msync(MS_SYNC) is an fsync of the file (FUSE sends one).
			r.Synced(inoOf(f), contentOf(f))
		}
		return fail(err)
	case Fallocate:
		f, ok := slot(op.Slot)
		if !ok {
			return result{err: unix.EBADF}
		}
		return fail(unix.Fallocate(int(f.Fd()), uint32(op.Flags), op.Off, op.Len))
	case CopyRange:
		in, ok1 := slot(op.Slot)
		out, ok2 := slot(op.Slot2)
		if !ok1 || !ok2 {
			return result{err: unix.EBADF}
		}
		roff, woff := op.Off, op.Off2
		n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(op.Len), 0)
		return result{err: errnoOf(err), n: int64(n)}
	case Sendfile:
		in, ok1 := slot(op.Slot)
		out, ok2 := slot(op.Slot2)
		if !ok1 || !ok2 {
			return result{err: unix.EBADF}
		}
		off := op.Off
		n, err := unix.Sendfile(int(out.Fd()), int(in.Fd()), &off, int(op.Len))
		return result{err: errnoOf(err), n: int64(n)}
	case Rename:
		return fail(unix.Renameat2(unix.AT_FDCWD, s.path(op.Path), unix.AT_FDCWD, s.path(op.Path2), uint(op.Flags)))
	case Link:
		return fail(unix.Link(s.path(op.Path), s.path(op.Path2)))
	case Unlink:
		return fail(unix.Unlink(s.path(op.Path)))
	case Mkdir:
		return fail(unix.Mkdir(s.path(op.Path), 0o755))
	case Rmdir:
		return fail(unix.Rmdir(s.path(op.Path)))
	case Setxattr:
		v := Payload(Op{Seed: op.Seed, Len: op.Len})
		return fail(unix.Lsetxattr(s.path(op.Path), fmt.Sprintf("user.rand%d", op.Flags), v, 0))
	case Removexattr:
		return fail(unix.Lremovexattr(s.path(op.Path), fmt.Sprintf("user.rand%d", op.Flags)))
	case Save:
		return fail(save(s.path(op.Path), Payload(op), op.Seed))
	case ReadFile:
		b, err := os.ReadFile(s.path(op.Path))
		return result{err: errnoOf(err), data: b}
	default:
		return result{err: unix.ENOSYS}
	}
	return result{}
}

func (s *side) close(k int, r *Runner, i int) error {
	f := s.slots[k]
	s.slots[k] = nil
	if i == 1 && r.writable[k] {
		r.writable[k] = false
		if r.Writers != nil {
			r.Writers(inoOf(f), contentOf(f), false)
		}
	}
	return f.Close()
}

// contentOf reads the content of f's inode, whatever its name now (nil if
// it cannot): through /proc, since f may be open write-only.
func contentOf(f *os.File) []byte {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	return b
}

func inoOf(f *os.File) uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	return st.Ino
}

// mmapWrite writes the op's bytes at Off through a shared mapping of the
// file, within its size (a mapping does not grow a file).
func mmapWrite(f *os.File, op Op) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		// A directory opened read-only: its size is the filesystem's own
		// (4096 on ext4, 0 on ckptfs), so the mapping is not tried.
		return unix.EACCES
	}
	if st.Size == 0 || op.Off >= st.Size {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(m[op.Off:], Payload(op))
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		unix.Munmap(m)
		return err
	}
	return unix.Munmap(m)
}

// save rewrites path whole, in pieces, as a checkpoint writer does.
func save(path string, data []byte, seed int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(seed))
	for len(data) > 0 {
		n := min(len(data), 1+rng.Intn(200_000))
		if _, err := f.Write(data[:n]); err != nil {
			f.Close()
			return err
		}
		data = data[n:]
	}
	return f.Close()
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, io.EOF) {
		return 0
	}
	return syscall.Errno(1 << 20) // some other error: must match too
}

func errName(e syscall.Errno) string {
	if e == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%v)", int(e), e)
}

func firstDiff(a, b []byte) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d, %d bytes)", len(a), len(b))
}

// Run applies ops in order and compares the whole trees every check steps
// and at the end; it returns the first mismatch.
func (r *Runner) Run(ops []Op, check int) error {
	for k, op := range ops {
		if err := r.Apply(op); err != nil {
			return err
		}
		if check > 0 && k%check == check-1 {
			if err := r.CompareTrees(); err != nil {
				return err
			}
		}
	}
	return r.CompareTrees()
}

// Shrink returns a shorter sequence that still fails: fails runs a
// sequence from a fresh start and reports whether it fails. It removes
// chunks of operations, halving their size down to one, within tries runs.
func Shrink(ops []Op, tries int, fails func([]Op) bool) []Op {
	for chunk := len(ops) / 2; chunk >= 1 && tries > 0; chunk /= 2 {
		for start := 0; start < len(ops) && tries > 0; {
			cand := append(append([]Op{}, ops[:start]...), ops[min(len(ops), start+chunk):]...)
			tries--
			if fails(cand) {
				ops = cand
			} else {
				start += chunk
			}
		}
	}
	return ops
}

// Regressions are sequences the random-operation tests found, shrunk: each
// ran wrong on the code of its day. integration.TestRandomOpsRegressions
// runs them against the binary in both save modes.
var Regressions = map[string][]Op{
	// Pages written through a shared mapping of a file opened O_APPEND
	// were written back at its end in daemon-written mode: the file
	// doubled.
	"mmap write through an O_APPEND handle": {
		{Kind: Save, Path: "a", Len: 461447, Seed: 645713911},
		{Kind: Open, Slot: 2, Path: "a", Flags: 1026},
		{Kind: MmapWrite, Slot: 2, Len: 281944, Seed: 880754149},
	},
	// A directory's size differs from ext4's (make stress; the runner's
	// own fault): a mapping of it is not tried on either side.
	"mmap write through a directory's handle": {
		{Kind: Rename, Slot: 3, Path: "d0/d1", Path2: "c.npy", Flags: 1},
		{Kind: Open, Slot: 3, Path: "c.npy"},
		{Kind: MmapWrite, Slot: 3, Len: 91, Seed: 973913563},
	},
}

// Package replay feeds checkpoint files through a throw-away store on a
// fresh simulated device, verifies every byte read back, and reports: the
// offline way to measure what ckptfs would write for a series.
package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// Options configure Run.
type Options struct {
	Policy       policy.Policy
	Device       nandsim.Config // zero: the paper's Table 4 device
	Precondition bool           // warm both devices up to Table 8 first
	// KeepLatest deletes every earlier file of a family once a newer one is
	// saved, as the paper's Algorithm 2 does, so that UsefulStoragePages
	// reproduces its Table 9.
	KeepLatest bool
	WorkDir    string // where the throw-away store lives (default: the temp dir)
	CacheBytes int64
	// Interval is the time between two checkpoints, for the lifetime
	// projection (default 20 minutes, about the paper's snapshot period).
	Interval time.Duration
	// Progress, if set, is told how many input bytes have been processed.
	Progress func(done, total int64)
	// Opened, if set, is called once the throw-away store is open, with the
	// memory its chunk cache may use.
	Opened func(ds *storedir.Dir, cacheBytes int64)
}

// Step is what happened to one input file.
type Step struct {
	Path               string  `json:"path"`
	LogicalBytes       int64   `json:"logical_bytes"`
	StoredBytes        int64   `json:"stored_bytes"`
	DevicePagesWritten int64   `json:"device_pages_written"`
	ShadowPagesWritten int64   `json:"shadow_pages_written"`
	Depth              uint32  `json:"chain_depth"`
	Format             string  `json:"format"`
	SaveMs             float64 `json:"save_ms"`    // simulated device time of the save
	RestoreMs          float64 `json:"restore_ms"` // simulated device time of reading it back
	UsefulPages        int64   `json:"useful_storage_pages"`
	Verified           bool    `json:"verified"`
}

// Result is the report after the last file, plus a row per file.
type Result struct {
	storedir.Report
	Steps []Step `json:"steps"`
}

// Run feeds files, in order, through the store's pipeline onto a fresh
// simulated device and its shadow, reads each back and checks it byte for
// byte, and reports. Paths keep their layout below the files' common
// directory, so families form as they would in a mount.
func Run(files []string, o Options) (*Result, error) {
	if len(files) == 0 {
		return nil, errors.New("replay: no files")
	}
	dir, err := os.MkdirTemp(o.WorkDir, "ckptfs-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cache := o.CacheBytes
	if cache <= 0 {
		cache = 32 << 20 // replay reads each file once: a small cache does
	}
	// Replay writes one file at a time, sequentially: each write is
	// encoded before the next is read.
	ds, err := storedir.Open(dir, storedir.Options{Options: chain.Options{Policy: o.Policy, CacheBytes: cache},
		Media: medium.Options{Device: o.Device, Precondition: o.Precondition, NoSync: true}})
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	if o.Opened != nil {
		o.Opened(ds, cache)
	}
	rel, total, err := relativePaths(files)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var done int64
	saved := map[string][]string{} // family -> paths saved, oldest first
	save := saveGroup{}
	for i, f := range files {
		// One synced metadata commit per save, as a mount makes for saves
		// more than a second apart (the metadata journal, docs/STORE.md).
		if save.ends(rel[i]) {
			if err := ds.Medium.DB.Flush(); err != nil {
				return nil, fmt.Errorf("replay %s: %w", f, err)
			}
		}
		step, err := replayOne(ds, f, rel[i], func(n int64) {
			done += n
			if o.Progress != nil {
				o.Progress(done, total)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", f, err)
		}
		fam := policy.FamilyOf(rel[i])
		if o.KeepLatest {
			for _, old := range saved[fam] {
				if old != rel[i] {
					if err := removePath(ds, old); err != nil {
						return nil, err
					}
				}
			}
			saved[fam] = saved[fam][:0]
		}
		saved[fam] = append(saved[fam], rel[i])
		if step.UsefulPages, err = ds.StoredPages(); err != nil {
			return nil, err
		}
		res.Steps = append(res.Steps, *step)
	}
	interval := o.Interval
	if interval <= 0 {
		interval = 20 * time.Minute
	}
	rep, err := ds.Report(storedir.ReportOptions{Window: interval * time.Duration(len(files))})
	if err != nil {
		return nil, err
	}
	res.Report = *rep
	// A replay that leaves an inconsistent store is a bug, not a figure.
	if chk, err := ds.Check(false); err != nil || len(chk.Problems) > 0 {
		if err == nil {
			err = fmt.Errorf("%d problems, first: %s", len(chk.Problems), chk.Problems[0])
		}
		return nil, fmt.Errorf("replay: store check failed: %w", err)
	}
	return res, nil
}

// relativePaths names files below their common directory.
func relativePaths(files []string) ([]string, int64, error) {
	abs := make([]string, len(files))
	var total int64
	for i, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			return nil, 0, err
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, 0, err
		}
		if !fi.Mode().IsRegular() {
			return nil, 0, fmt.Errorf("%s is not a regular file", f)
		}
		abs[i] = a
		total += fi.Size()
	}
	common := filepath.Dir(abs[0])
	for _, a := range abs[1:] {
		for !strings.HasPrefix(a, common+string(filepath.Separator)) && common != "/" {
			common = filepath.Dir(common)
		}
	}
	rel := make([]string, len(abs))
	for i, a := range abs {
		r, err := filepath.Rel(common, a)
		if err != nil {
			return nil, 0, err
		}
		rel[i] = filepath.ToSlash(r)
	}
	return rel, total, nil
}

// replayOne saves one file at path p, then reads it back.
func replayOne(ds *storedir.Dir, file, p string, progress func(int64)) (*Step, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ino, err := createPath(ds, p)
	if err != nil {
		return nil, err
	}
	devBefore, shBefore := ds.Dev.Stats().HostPagesWritten, ds.Shadow.Stats().HostPagesWritten
	mark := ds.Dev.Mark()
	w, err := ds.NewWriter(ino, func() string { return p })
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			if _, err := w.WriteAt(buf[:n], off, 0); err != nil {
				w.Abort()
				return nil, err
			}
			off += int64(n)
			progress(int64(n) / 2)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			w.Abort()
			return nil, rerr
		}
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}
	step := &Step{Path: p, LogicalBytes: off, SaveMs: msOf(ds.Dev.Since(mark)),
		DevicePagesWritten: ds.Dev.Stats().HostPagesWritten - devBefore,
		ShadowPagesWritten: ds.Shadow.Stats().HostPagesWritten - shBefore}
	if info, err := ds.Info(ino); err == nil && info != nil {
		step.StoredBytes, step.Depth, step.Format = info.StoredBytes, info.Depth, info.Format
	}
	// Read back from the device, not from the cache of this save.
	ds.DropCaches()
	mark = ds.Dev.Mark()
	if err := compareWith(ds, ino, f, progress); err != nil {
		return nil, err
	}
	step.RestoreMs = msOf(ds.Dev.Since(mark))
	step.Verified = true
	return step, nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// compareWith reads inode ino's content and compares it with f.
func compareWith(ds *storedir.Dir, ino meta.Ino, f *os.File, progress func(int64)) error {
	n, err := ds.Names().Inode(ino)
	if err != nil {
		return err
	}
	r, err := ds.OpenVersion(n.Version)
	if err != nil {
		return err
	}
	r.SkipTier()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < r.Size(); {
		k := min(int64(len(a)), r.Size()-off)
		if _, err := r.ReadAt(a[:k], off); err != nil && err != io.EOF {
			return fmt.Errorf("read back at %d: %w", off, err)
		}
		if _, err := f.ReadAt(b[:k], off); err != nil && err != io.EOF {
			return err
		}
		if !bytes.Equal(a[:k], b[:k]) {
			return fmt.Errorf("read back differs from the file in [%d,%d)", off, off+k)
		}
		off += k
		progress(k - k/2)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != r.Size() {
		return fmt.Errorf("read back %d bytes, file has %d", r.Size(), fi.Size())
	}
	return nil
}

// createPath creates (or finds) the regular file p, making its directories.
func createPath(ds *storedir.Dir, p string) (meta.Ino, error) {
	parent := meta.RootIno
	parts := strings.Split(p, "/")
	for i, name := range parts {
		last := i == len(parts)-1
		n, err := ds.Names().Lookup(parent, name)
		if errors.Is(err, syscall.ENOENT) {
			mode := uint32(syscall.S_IFDIR | 0o755)
			if last {
				mode = syscall.S_IFREG | 0o644
			}
			n, err = ds.Names().Create(parent, name, chain.NewNode{Mode: mode})
		}
		if err != nil {
			return 0, err
		}
		parent = n.Ino
	}
	return parent, nil
}

// removePath unlinks the file p.
func removePath(ds *storedir.Dir, p string) error {
	parent := meta.RootIno
	parts := strings.Split(p, "/")
	for _, name := range parts[:len(parts)-1] {
		n, err := ds.Names().Lookup(parent, name)
		if err != nil {
			return err
		}
		parent = n.Ino
	}
	return ds.Names().Unlink(parent, parts[len(parts)-1], nil)
}

// saveGroup tells where one save of a replayed series ends: a file in
// another directory (checkpoint-N/ after checkpoint-M/) or one of a family
// the save already has (ckpt-2.pt after ckpt-1.pt) starts the next.
type saveGroup struct {
	dir      string
	families map[string]bool
}

// ends reports whether the file at rel starts a new save, and notes it.
func (g *saveGroup) ends(rel string) bool {
	dir, fam := filepath.Dir(rel), policy.FamilyOf(rel)
	ended := g.families != nil && (dir != g.dir || g.families[fam])
	if ended || g.families == nil {
		g.dir, g.families = dir, map[string]bool{}
	}
	g.families[fam] = true
	return ended
}

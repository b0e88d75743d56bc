package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/chain/storedir"
)

var (
	scaleSizes   = []int64{100 << 20, 1 << 30, 4 << 30}
	writerCounts = []int{1, 2, 4}
)

// replayRuns is how often the 4 GiB replay runs.
const replayRuns = 2

// writerBytes is each concurrent writer's file.
const writerBytes = 256 << 20

// The issues' memory bounds: issue 5 (replay) and issue 6 (the daemon).
const (
	replayRSSLimit = 300 << 20
	daemonRSSLimit = 300 << 20
)

// scaleMountFlags give the daemon the memory of a small machine, to which
// issue 6's bound applies; the defaults follow the machine's RAM (a few GB
// here: section 9 has the daemon's peak at its defaults).
var scaleMountFlags = []string{"--cache-mib", "128", "--memory-limit", "256MiB"}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// runScaleSection copies synthetic checkpoints of 100 MiB, 1 GiB and 4 GiB
// (a baseline, then a version 0.1% away) into a fresh mount each with cp,
// reads the second back cold, and records the daemon's peak RSS; then
// replays the 4 GiB pair with ckptfs replay; then runs 1, 2 and 4 writers
// at once. Sources are generated in the scratch directory on the same disk
// and removed afterwards.
func runScaleSection(b *bench) error {
	sec := &Scale{Limits: ScaleLimits{ReplayMaxRSS: replayRSSLimit, DaemonMaxRSS: daemonRSSLimit},
		Generator: "float32 .npy vectors, values hashed from (seed, index, version): a triangular bump 0.05 wide, " +
			"every version within 0.1% (relative, uniform) of a common centre, so consecutive versions differ by up to 0.2%; version 0 then version 1"}
	b.res.Scale = sec
	src := filepath.Join(b.tmp, "scale-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	var pair [2]string
	for _, size := range scaleSizes {
		row, files, err := b.scaleOne(src, size, sec)
		if err != nil {
			return err
		}
		sec.Sizes = append(sec.Sizes, *row)
		pair = files
	}
	rr, err := b.replayRSS(pair)
	if err != nil {
		return err
	}
	sec.Replay = rr
	for _, f := range pair {
		os.Remove(f)
	}
	return b.writers(src, sec)
}

// scaleOne measures one size and returns the two files it made (the caller
// removes them).
func (b *bench) scaleOne(src string, size int64, sec *Scale) (*ScaleRow, [2]string, error) {
	var files [2]string
	var crcs [2]uint32
	t0 := time.Now()
	for v := range files {
		files[v] = filepath.Join(src, fmt.Sprintf("big-%d.npy", v))
		var err error
		if crcs[v], err = synthFileCRC(files[v], size, 5, v); err != nil {
			return nil, files, err
		}
	}
	logf("scale %d MiB: generated 2 files in %.0f s", size>>20, since(t0))
	d, err := b.mount(fmt.Sprintf("scale-%d", size>>20), scaleMountFlags...)
	if err != nil {
		return nil, files, err
	}
	if sec.IdleHWM == 0 {
		sec.IdleHWM = d.peakRSS()
	}
	row := &ScaleRow{Bytes: size}
	dst := func(v int) string { return filepath.Join(d.mnt, "big", fmt.Sprintf("ckpt-%d.npy", v+1)) }
	if err := os.MkdirAll(filepath.Join(d.mnt, "big"), 0o755); err != nil {
		return nil, files, err
	}
	for v, into := range []*float64{&row.BaseS, &row.DeltaS} {
		evict(files[v])
		t0 := time.Now()
		if _, err := b.output(nil, "cp", files[v], dst(v)); err != nil {
			d.unmount()
			return nil, files, err
		}
		*into = since(t0)
	}
	evict(dst(1))
	d.evictStore()
	t0 = time.Now()
	crc, n, err := crcFile(dst(1))
	if err != nil {
		d.unmount()
		return nil, files, err
	}
	row.ReadS = since(t0)
	row.Verified = crc == crcs[1] && n == fileSize(files[1])
	rep, err := d.report()
	if err != nil {
		d.unmount()
		return nil, files, err
	}
	for _, f := range rep.FileRows {
		if f.Path == "big/ckpt-2.npy" && f.Size > 0 {
			row.StoredRatio = float64(f.StoredBytes) / float64(f.Size)
		}
	}
	row.DaemonHWM = d.peakRSS()
	if err := d.unmount(); err != nil {
		return nil, files, err
	}
	if err := os.RemoveAll(filepath.Dir(d.store)); err != nil {
		return nil, files, err
	}
	plain := filepath.Join(src, "plain-copy.npy")
	evict(files[1])
	t0 = time.Now()
	if _, err := b.output(nil, "cp", files[1], plain); err != nil {
		return nil, files, err
	}
	row.PlainS = since(t0)
	os.Remove(plain)
	row.BaseMBs, row.DeltaMBs, row.ReadMBs = mbps(size, row.BaseS), mbps(size, row.DeltaS), mbps(size, row.ReadS)
	row.PlainMBs = mbps(size, row.PlainS)
	logf("scale %d MiB: base %.1f s, delta %.1f s, read %.1f s, plain cp %.1f s, daemon peak RSS %d MiB, verified %v",
		size>>20, row.BaseS, row.DeltaS, row.ReadS, row.PlainS, row.DaemonHWM>>20, row.Verified)
	if !row.Verified {
		return nil, files, fmt.Errorf("scale %d MiB: the file read back from the mount differs from the source", size>>20)
	}
	if size != scaleSizes[len(scaleSizes)-1] {
		for _, f := range files {
			os.Remove(f)
		}
	}
	return row, files, nil
}

// replayRSS replays the two largest files offline and takes its peak RSS
// from the kernel's accounting of the child.
func (b *bench) replayRSS(files [2]string) (*ReplayRSS, error) {
	args := []string{"replay", "--json", "--quiet", "--work-dir", b.tmp, files[0], files[1]}
	rr := &ReplayRSS{Command: "bin/ckptfs replay --json --quiet BIG-0.npy BIG-1.npy  (peak RSS: its own ru_maxrss, taken by a small fresh parent)",
		FileBytes: fileSize(files[0]), Files: 2}
	for range replayRuns {
		t0 := time.Now()
		out, rss, err := b.peakRSS(b.bin, args...)
		if err != nil {
			return nil, err
		}
		rr.Seconds = append(rr.Seconds, since(t0))
		rr.RSS = append(rr.RSS, rss)
		rr.MaxRSS = max(rr.MaxRSS, rss)
		var rep storedir.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			return nil, fmt.Errorf("replay output: %w", err)
		}
		rr.Ratio = rep.WrittenVolumeRatio
		logf("replay of 2 x %d MiB: %.0f s, peak RSS %d MiB", rr.FileBytes>>20, since(t0), rss>>20)
	}
	return rr, nil
}

// writers runs n writers at once, each copying its own baseline and then
// its delta into a directory of its own (a family each).
func (b *bench) writers(src string, sec *Scale) error {
	maxN := writerCounts[len(writerCounts)-1]
	files := make([][2]string, maxN)
	crcs := make([]uint32, maxN)
	for w := range files {
		for v := range files[w] {
			files[w][v] = filepath.Join(src, fmt.Sprintf("w%d-%d.npy", w, v))
			crc, err := synthFileCRC(files[w][v], writerBytes, uint64(100+w), v)
			if err != nil {
				return err
			}
			if v == 1 {
				crcs[w] = crc
			}
		}
	}
	defer func() {
		for _, f := range files {
			os.Remove(f[0])
			os.Remove(f[1])
		}
	}()
	for _, n := range writerCounts {
		d, err := b.mount(fmt.Sprintf("writers-%d", n), scaleMountFlags...)
		if err != nil {
			return err
		}
		dir := func(w int) string { return filepath.Join(d.mnt, "writer-"+string(rune('a'+w))) }
		for w := 0; w < n; w++ {
			os.MkdirAll(dir(w), 0o755)
			evict(files[w][0])
			evict(files[w][1])
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := 0; w < n; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for v := range 2 {
					if _, err := b.output(nil, "cp", files[w][v], filepath.Join(dir(w), fmt.Sprintf("ckpt-%d.npy", v+1))); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		row := WriterRow{Writers: n, FileBytes: writerBytes, WallS: since(t0), Verified: true}
		if err := errors.Join(errs...); err != nil {
			d.unmount()
			return err
		}
		row.AggMBs = mbps(int64(n)*2*writerBytes, row.WallS)
		for w := 0; w < n; w++ {
			crc, _, err := crcFile(filepath.Join(dir(w), "ckpt-2.npy"))
			row.Verified = row.Verified && err == nil && crc == crcs[w]
		}
		row.DaemonHWM = d.peakRSS()
		if err := d.unmount(); err != nil {
			return err
		}
		os.RemoveAll(filepath.Dir(d.store))
		logf("%d writers: %.1f s, %.0f MB/s, daemon peak RSS %d MiB, verified %v", n, row.WallS, row.AggMBs, row.DaemonHWM>>20, row.Verified)
		if !row.Verified {
			return fmt.Errorf("%d writers: a file read back differs from its source", n)
		}
		sec.Writers = append(sec.Writers, row)
	}
	return nil
}

// synthFileCRC writes a synthetic checkpoint and returns its CRC-32C.
func synthFileCRC(path string, size int64, seed uint64, v int) (uint32, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	h := crc32.New(castagnoli)
	if err := writeSynth(io.MultiWriter(f, h), size, seed, v); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return h.Sum32(), f.Close()
}

// crcFile reads a file sequentially in 1 MiB calls, returning its CRC-32C
// and length.
func crcFile(path string) (uint32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			return h.Sum32(), n, nil
		}
		if err != nil {
			return 0, n, err
		}
	}
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

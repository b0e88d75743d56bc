package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// seqBytes is the file each sequential write and read moves.
const seqBytes = 512 << 20

// seqTarget is a directory written and read through one filesystem.
type seqTarget struct {
	name string
	dir  string
	cold func(path string) // drop what a read could find cached
}

// runSeqIOSection writes and reads a 512 MiB float32 .npy file sequentially
// (1 MiB calls) through ckptfs, two go-fuse loopback mounts of the same disk
// (one forwarding every read and write through its daemon, one handing them
// to the kernel: passthrough) and the plain directory, rotating the order
// each repetition. Each repetition
// writes a new version of the file (0.1% drift), so ckptfs codes it against
// the previous one as it would a checkpoint. Reads are cold.
func runSeqIOSection(b *bench) error {
	d, err := b.mount("seq")
	if err != nil {
		return err
	}
	defer func() {
		if d != nil {
			d.unmount()
		}
	}()
	base := filepath.Join(b.tmp, "seq")
	orig, ptOrig := filepath.Join(base, "loop-orig"), filepath.Join(base, "passthrough-orig")
	lb, err := b.startLoopback(orig, filepath.Join(base, "loop-mnt"), false)
	if err != nil {
		return err
	}
	pt, err := b.startLoopback(ptOrig, filepath.Join(base, "passthrough-mnt"), true)
	if err != nil {
		lb.stop()
		return err
	}
	defer func() {
		if lb != nil {
			lb.stop()
			pt.stop()
		}
	}()
	targets := []seqTarget{
		{"ckptfs", d.mnt, func(p string) { evict(p); d.evictStore() }},
		{"loopback", lb.mnt, func(p string) { evict(p); evictTree(orig) }},
		{"passthrough", pt.mnt, func(p string) { evict(p); evictTree(ptOrig) }},
		{"plain", filepath.Join(base, "plain"), func(p string) { evict(p) }},
	}
	sec := &SeqIO{FileBytes: seqBytes, Targets: map[string]*SeqTimes{}}
	var order []string
	for _, t := range targets {
		sec.Targets[t.name] = &SeqTimes{Verified: true}
		if err := os.MkdirAll(filepath.Join(t.dir, "seq"), 0o755); err != nil {
			return err
		}
	}
	for r := 0; r < b.reps; r++ {
		data := synthBytes(seqBytes, 11, r)
		var names []string
		for i := range targets {
			names = append(names, targets[(i+r)%len(targets)].name)
		}
		order = append(order, strings.Join(names, ","))
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			p := filepath.Join(t.dir, "seq", fmt.Sprintf("data-%d.npy", r))
			t0 := time.Now()
			if err := writeSeq(p, data); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			sec.Targets[t.name].Write = append(sec.Targets[t.name].Write, since(t0))
		}
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			p := filepath.Join(t.dir, "seq", fmt.Sprintf("data-%d.npy", r))
			t.cold(p)
			t0 := time.Now()
			same, err := readSeq(p, data)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			st := sec.Targets[t.name]
			st.Read = append(st.Read, since(t0))
			st.Verified = st.Verified && same
		}
		for _, t := range targets {
			os.Remove(filepath.Join(t.dir, "seq", fmt.Sprintf("data-%d.npy", r)))
		}
		logf("sequential I/O repetition %d: %s", r, order[r])
	}
	sec.Order = "per repetition: " + strings.Join(order, "; ")
	for _, st := range sec.Targets {
		st.WriteMBs, st.ReadMBs = mbps(seqBytes, median(st.Write)), mbps(seqBytes, median(st.Read))
		if !st.Verified {
			return fmt.Errorf("sequential read back differs from what was written")
		}
	}
	sec.Targets["ckptfs"].DaemonHWM = d.peakRSS()
	b.res.SeqIO = sec
	err = errors.Join(lb.stop(), pt.stop(), d.unmount())
	lb, d = nil, nil
	return err
}

// writeSeq writes data to path in 1 MiB calls and closes it.
func writeSeq(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := f.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readSeq reads path in 1 MiB calls and reports whether it equals want.
func readSeq(path string, want []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	off, same := 0, true
	for {
		n, err := io.ReadFull(f, buf)
		same = same && off+n <= len(want) && bytes.Equal(buf[:n], want[off:off+n])
		off += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return false, err
		}
	}
	return same && off == len(want), nil
}

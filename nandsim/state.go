package nandsim

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// The state file (docs/NANDSIM.md has the layout):
//
//	header   magic "NANDSIM\x00", u32 version, u64 geometry fingerprint
//	payload  DEFLATE of the FTL fields, varint coded (see encodeState)
//	trailer  u64 payload length, u32 CRC-32C of everything before it
//
// All integers little-endian. Derived structures (p2l, valid counts,
// buckets' membership) are rebuilt on load and the result is checked in
// full, so a file that passes the CRC but lies still cannot corrupt the FTL.
const (
	stateMagic   = "NANDSIM\x00"
	stateVersion = 2 // 1: the page map dense, one delta per logical page
	headerLen    = 8 + 4 + 8
	trailerLen   = 8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeState serialises f. The page map is coded as its mapped entries
// only (their count, then per entry the gap since the last mapped logical
// page and the zigzag delta of the physical page), which sequentially
// written data makes small and repetitive, then deflated: the file and the
// time to write it follow the pages stored, not the capacity.
func encodeState(f *ftl) []byte {
	var out bytes.Buffer
	out.WriteString(stateMagic)
	binary.Write(&out, binary.LittleEndian, uint32(stateVersion))
	binary.Write(&out, binary.LittleEndian, f.cfg.fingerprint())
	zw, _ := flate.NewWriter(&out, flate.BestSpeed) // level is valid: no error
	w := &encoder{w: bufio.NewWriterSize(zw, 1<<16)}

	w.uvarint(uint64(f.tick))
	w.uvarint(uint64(f.nextDie))
	for _, c := range []int64{f.ctr.hostWritten, f.ctr.hostRead, f.ctr.programmed,
		f.ctr.gcCopied, f.ctr.gcRuns, f.ctr.erases, f.ctr.trimmed} {
		w.uvarint(uint64(c))
	}
	w.float(f.clock.now())
	for _, b := range f.clock.busy {
		w.float(b)
	}
	for d := range f.dies {
		for _, fr := range []frontier{f.dies[d].host, f.dies[d].gc} {
			if fr.block < 0 {
				w.uvarint(0)
			} else {
				w.uvarint(uint64(fr.block - int32(d)*f.blocksPerDie + 1))
			}
			w.uvarint(uint64(fr.next))
		}
	}
	for b := range f.state {
		w.byte(byte(f.state[b]))
		w.uvarint(uint64(f.erases[b]))
		w.uvarint(uint64(f.tick - f.stamp[b]))
	}
	// List order decides which block is used or cleaned next; keep it.
	for d := range f.dies {
		dd := &f.dies[d]
		base := int32(d) * f.blocksPerDie
		w.list(f, dd.free, base)
		for v := range dd.buckets {
			w.list(f, dd.buckets[v], base)
		}
	}
	w.uvarint(uint64(f.l2p.mapped))
	prevL, prevP := int64(-1), int64(-1)
	f.l2p.each(func(lpn, ppn int32) {
		w.uvarint(uint64(int64(lpn) - prevL - 1))
		w.varint(int64(ppn) - prevP)
		prevL, prevP = int64(lpn), int64(ppn)
	})
	w.w.Flush()
	zw.Close()

	payloadLen := uint64(out.Len() - headerLen)
	binary.Write(&out, binary.LittleEndian, payloadLen)
	binary.Write(&out, binary.LittleEndian, crc32.Checksum(out.Bytes(), castagnoli))
	return out.Bytes()
}

// snapshot copies what encodeState reads, so it can run unlocked.
func (f *ftl) snapshot() *ftl {
	c := *f
	c.l2p = f.l2p.clone()
	c.erases = slices.Clone(f.erases)
	c.stamp = slices.Clone(f.stamp)
	c.state = slices.Clone(f.state)
	c.prev = slices.Clone(f.prev)
	c.next = slices.Clone(f.next)
	c.dies = slices.Clone(f.dies)
	for d := range c.dies {
		c.dies[d].buckets = slices.Clone(f.dies[d].buckets)
	}
	c.clock.chipFree = slices.Clone(f.clock.chipFree)
	c.clock.busFree = slices.Clone(f.clock.busFree)
	c.clock.busy = slices.Clone(f.clock.busy)
	c.p2l, c.valid, c.afterGC = pageMap{}, nil, nil // not saved
	return &c
}

type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) uvarint(v uint64) { e.w.Write(binary.AppendUvarint(e.buf[:0], v)) }
func (e *encoder) varint(v int64)   { e.w.Write(binary.AppendVarint(e.buf[:0], v)) }
func (e *encoder) byte(v byte)      { e.w.WriteByte(v) }
func (e *encoder) float(v float64) {
	e.w.Write(binary.LittleEndian.AppendUint64(e.buf[:0], math.Float64bits(v)))
}

func (e *encoder) list(f *ftl, l blockList, base int32) {
	e.uvarint(uint64(l.n))
	f.each(&l, func(b int32) { e.uvarint(uint64(b - base)) })
}

// writeFileAtomic replaces path with data: temp file, fsync, rename, fsync
// of the directory. A crash leaves the old or the new file, never half.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

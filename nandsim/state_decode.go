package nandsim

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"syscall"
)

// loadState reads and decodes the state file at path for cfg.
func loadState(path string, cfg Config) (*ftl, error) {
	data, err := readNoFollow(path)
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	f, err := decodeState(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("load state %s: %w", path, err)
	}
	return f, nil
}

// decodeState checks the envelope, then decodes the payload.
func decodeState(data []byte, cfg Config) (*ftl, error) {
	if len(data) < headerLen+trailerLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than header and trailer", ErrBadState, len(data))
	}
	if string(data[:8]) != stateMagic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrBadState, data[:8])
	}
	version := binary.LittleEndian.Uint32(data[8:])
	if version < 1 || version > stateVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrBadState, version, stateVersion)
	}
	body := data[:len(data)-4]
	if sum := binary.LittleEndian.Uint32(data[len(data)-4:]); sum != crc32.Checksum(body, castagnoli) {
		return nil, fmt.Errorf("%w: checksum mismatch (truncated or corrupt)", ErrBadState)
	}
	if fp := binary.LittleEndian.Uint64(data[12:]); fp != cfg.fingerprint() {
		return nil, fmt.Errorf("%w: saved for another geometry (fingerprint %016x, want %016x)", ErrBadState, fp, cfg.fingerprint())
	}
	payloadLen := binary.LittleEndian.Uint64(data[len(data)-trailerLen:])
	if payloadLen != uint64(len(data)-headerLen-trailerLen) {
		return nil, fmt.Errorf("%w: payload length %d does not match file", ErrBadState, payloadLen)
	}
	return decodePayload(data[headerLen:len(data)-trailerLen], cfg, version)
}

// decodePayload rebuilds an ftl from a deflated payload. Every value is
// range-checked before use, and the result must pass check().
func decodePayload(payload []byte, cfg Config, version uint32) (*ftl, error) {
	// Inflate whole, bounded by the largest payload cfg can produce: a
	// small file must not inflate into gigabytes.
	limit := maxPayload(cfg)
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(payload)), limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: inflate: %w", ErrBadState, err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: payload inflates past %d bytes", ErrBadState, limit)
	}
	r := &decoder{b: raw}
	f := newFTL(cfg)
	nBlocks := int64(len(f.state))

	f.tick = r.int("tick", 0, math.MaxInt64)
	f.nextDie = int32(r.int("next die", 0, int64(f.nDies)-1))
	for _, c := range []*int64{&f.ctr.hostWritten, &f.ctr.hostRead, &f.ctr.programmed,
		&f.ctr.gcCopied, &f.ctr.gcRuns, &f.ctr.erases, &f.ctr.trimmed} {
		*c = r.int("counter", 0, math.MaxInt64)
	}
	now := r.float("clock")
	f.clock.barrierAt(now)
	for i := range f.clock.busy {
		f.clock.busy[i] = r.float("busy time")
	}
	for d := range f.dies {
		for _, fr := range []*frontier{&f.dies[d].host, &f.dies[d].gc} {
			fr.block = int32(r.int("frontier block", 0, int64(f.blocksPerDie))) - 1
			if fr.block >= 0 {
				fr.block += int32(d) * f.blocksPerDie
			}
			fr.next = int32(r.int("frontier page", 0, int64(f.pages)))
		}
	}
	for b := int64(0); b < nBlocks && r.err == nil; b++ {
		f.state[b] = blockState(r.int("block state", int64(blockFree), int64(blockClosed)))
		f.erases[b] = uint32(r.int("erase count", 0, math.MaxUint32))
		f.stamp[b] = f.tick - r.int("block age", 0, f.tick)
	}
	if r.err != nil {
		return nil, r.err
	}
	// Lists: read them into fresh lists, refusing repeats; the states and
	// bucket indices are cross-checked by check() below.
	onList := make([]bool, nBlocks)
	for d := range f.dies {
		dd := &f.dies[d]
		dd.free = emptyList()
		lists := append([]*blockList{&dd.free}, bucketPtrs(dd)...)
		for _, l := range lists {
			*l = emptyList()
			n := r.int("list length", 0, int64(f.blocksPerDie))
			for i := int64(0); i < n && r.err == nil; i++ {
				b := int32(d)*f.blocksPerDie + int32(r.int("list block", 0, int64(f.blocksPerDie)-1))
				if r.err == nil && onList[b] {
					r.err = fmt.Errorf("%w: block %d listed twice", ErrBadState, b)
				}
				if r.err == nil {
					onList[b] = true
					f.pushBack(l, b)
				}
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if version == 1 {
		if err := decodeDenseMap(f, r); err != nil {
			return nil, err
		}
	} else if err := decodeSparseMap(f, r); err != nil {
		return nil, err
	}
	if len(r.b) > 0 {
		return nil, fmt.Errorf("%w: %d bytes of trailing data after the page map", ErrBadState, len(r.b))
	}
	for d := range f.dies {
		dd := &f.dies[d]
		dd.minValid = 0 // recomputed by the first victim search
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	return f, nil
}

// decodeDenseMap reads a version 1 page map: one delta per logical page.
func decodeDenseMap(f *ftl, r *decoder) error {
	prev := int64(-1)
	for lpn := int32(0); lpn < f.l2p.len(); lpn++ {
		p := prev + r.varint()
		if r.err != nil {
			return r.err
		}
		if err := f.mapLoaded(lpn, p); err != nil {
			return err
		}
		prev = p
	}
	return nil
}

// decodeSparseMap reads a version 2 page map: the mapped entries only.
func decodeSparseMap(f *ftl, r *decoder) error {
	n := r.int("mapped pages", 0, int64(f.l2p.len()))
	prevL, prevP := int64(-1), int64(-1)
	for i := int64(0); i < n; i++ {
		lpn := prevL + 1 + r.int("logical page gap", 0, int64(f.l2p.len())-prevL-2)
		p := prevP + r.varint()
		if r.err != nil {
			return r.err
		}
		if p < 0 {
			return fmt.Errorf("%w: logical page %d maps to physical %d, out of range", ErrBadState, lpn, p)
		}
		if err := f.mapLoaded(int32(lpn), p); err != nil {
			return err
		}
		prevL, prevP = lpn, p
	}
	return r.err
}

// mapLoaded maps lpn to p (-1: none) as read from a state file, refusing
// pages out of range and physical pages mapped twice.
func (f *ftl) mapLoaded(lpn int32, p int64) error {
	if p < -1 || p >= int64(f.p2l.len()) {
		return fmt.Errorf("%w: logical page %d maps to physical %d, out of range", ErrBadState, lpn, p)
	}
	if p < 0 {
		return nil
	}
	if f.p2l.get(int32(p)) >= 0 {
		return fmt.Errorf("%w: physical page %d mapped twice", ErrBadState, p)
	}
	f.l2p.set(lpn, int32(p))
	f.p2l.set(int32(p), lpn)
	f.valid[p/int64(f.pages)]++
	return nil
}

func bucketPtrs(dd *die) []*blockList {
	ps := make([]*blockList, len(dd.buckets))
	for i := range dd.buckets {
		ps[i] = &dd.buckets[i]
	}
	return ps
}

// maxPayload bounds the inflated payload for cfg: every varint at its
// longest (10 bytes).
func maxPayload(cfg Config) int64 {
	const v = binary.MaxVarintLen64
	blocks, dies := cfg.TotalBlocks(), int64(cfg.Dies())
	return 9*v + 8*(1+int64(cfg.Channels)) + dies*4*v + blocks*(1+2*v) +
		dies*int64(cfg.PagesPerBlock+2)*v + blocks*v + v + cfg.LogicalPages()*2*v
}

// decoder reads fields from the front of b; the first error sticks and
// later reads return zero, so callers check r.err once per section.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: reading %s: %w", ErrBadState, what, err)
	}
}

// int reads an unsigned varint and checks it lies in [lo, hi].
func (d *decoder) int(what string, lo, hi int64) int64 {
	if d.err != nil {
		return lo
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what, io.ErrUnexpectedEOF)
		return lo
	}
	d.b = d.b[n:]
	if v > uint64(math.MaxInt64) || int64(v) < lo || int64(v) > hi {
		d.fail(what, fmt.Errorf("value %d outside [%d, %d]", v, lo, hi))
		return lo
	}
	return int64(v)
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("page map", io.ErrUnexpectedEOF)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) float(what string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(what, io.ErrUnexpectedEOF)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if !(v >= 0) || math.IsInf(v, 0) {
		d.fail(what, fmt.Errorf("time %v is not a finite non-negative number", v))
		return 0
	}
	return v
}

// readNoFollow reads the file at path, refusing a symlink (O_NOFOLLOW): a
// state file planted as a symlink is not followed.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

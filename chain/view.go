package chain

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// The view at bfloat16 precision (issue 51; docs/ARCHIVE.md): a version
// read with the low 16 bits of every float32 element of its float32
// chunks zeroed, which is bfloat16 rounded toward zero, kept as float32 in
// the same file format. Chunks of other dtypes read exact. Where the chunk
// and every chunk of its chain below are split16 (a store saved or
// repacked with --codec split16), the view decodes their high planes only;
// elsewhere it rebuilds the exact bytes and cuts them, so a view of any
// store reads the same bytes, only slower.

// Precision is a precision view's: how it reads float32 values, kept as
// float32 in the same file format.
type Precision uint8

const (
	exact Precision = iota // not a view
	// BF16 zeroes each value's low 16 bits: bfloat16 rounded toward zero,
	// rebuilt from a split16 chain's high records alone.
	BF16
	// BF16Nearest rounds to the nearest bfloat16 (encode.RoundBF16).
	BF16Nearest
	// FP16 rounds to the nearest float16 (encode.RoundFP16): torch's
	// x.half().float().
	FP16
)

// Precisions are the views a mount shows, by name.
var Precisions = []Precision{BF16, BF16Nearest, FP16}

func (p Precision) String() string {
	switch p {
	case BF16:
		return "bf16"
	case BF16Nearest:
		return "bf16-nearest"
	case FP16:
		return "fp16"
	}
	return "exact"
}

// apply turns a float32 chunk's exact bytes into the view's.
func (p Precision) apply(b []byte) {
	switch p {
	case BF16:
		encode.TruncateFloat32(b)
	case BF16Nearest:
		encode.RoundFloat32BF16(b)
	case FP16:
		encode.RoundFloat32FP16(b)
	}
}

// OpenView opens a committed version for reading at bfloat16 precision
// (BF16); OpenPrecision at any.
func (s *Store) OpenView(id meta.VersionID) (*Reader, error) { return s.OpenPrecision(id, BF16) }

// OpenPrecision opens a committed version for reading in the view of
// precision p. It reads like OpenVersion's Reader, read-ahead included,
// but its bytes are not the file's: the whole-file checksum is not
// checked, and the reference tier's exact chunks are not used.
func (s *Store) OpenPrecision(id meta.VersionID, p Precision) (*Reader, error) {
	if p == exact || p > FP16 {
		return nil, fmt.Errorf("view of version %d: no precision %d", id, p)
	}
	r, err := s.OpenVersion(id)
	if err != nil {
		return nil, err
	}
	r.view = p
	if err := s.patchViewZip(r); err != nil {
		return nil, fmt.Errorf("view of version %d: %w", id, err)
	}
	return r, nil
}

// patchViewZip corrects the CRC-32 fields of a zip archive's members
// (NumPy's .npz) in r's view: their bytes are cut, and Python's zipfile
// (np.load) refuses a member whose CRC does not match. The fields come
// before the data they cover, so the open reads every member's view once.
// torch.save archives are left as they are: torch.load checks no CRC, and
// the open would decode the whole checkpoint twice.
func (s *Store) patchViewZip(r *Reader) error {
	if r.size == 0 {
		return nil
	}
	readAt := func(p []byte, off int64) error {
		n, err := r.ReadAt(p, off)
		if n == len(p) {
			return nil
		}
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	members, err := zipMembers(readAt, r.size)
	if errors.Is(err, errNotZip) || err == nil && (len(members) == 0 || slices.ContainsFunc(members, zipMember.torchPickle)) {
		return nil
	}
	if err != nil {
		return err
	}
	zc := newZipCRCs(members)
	buf := bufpool.Get(1 << 20)
	defer bufpool.Put(buf)
	for _, m := range members {
		for off := m.data; off < m.data+m.size; {
			n := min(int64(len(buf)), m.data+m.size-off)
			if err := readAt(buf[:n], off); err != nil {
				return err
			}
			zc.observe(off, buf[:n], n)
			off += n
		}
	}
	r.patches = zc.patches()
	return nil
}

// chunkOf returns the chunk of the reader's version at off, exact or in
// its view.
func (r *Reader) chunkOf(off int64) ([]byte, error) {
	if r.view != exact {
		return r.s.cachedRebuild(plaincache.Key{V: r.id, Off: off, View: uint8(r.view)}, func() ([]byte, error) { return r.s.rebuildView(r.id, off, r.view) })
	}
	return r.s.chunkPlain(r.id, off)
}

// rebuildView rebuilds one chunk's view: from the high planes of its chain
// where all of it is split16, else from its exact bytes.
func (s *Store) rebuildView(id meta.VersionID, off int64, p Precision) ([]byte, error) {
	links, err := s.chainOf(id, off)
	if err != nil {
		return nil, err
	}
	if p != BF16 {
		// Rounding to nearest needs the low bits: the exact chunk, whose
		// header alone says its dtype.
		var head []byte
		if c := links[0].c; !c.Zeros() {
			if head, err = s.readPack(links[0].lay.pack, c.PackOff, min(c.EncLen, encode.HighProbeLen)); err != nil {
				return nil, fmt.Errorf("version %d chunk at %d: %w", id, off, err)
			}
			defer bufpool.Put(head)
		}
		return s.rebuildCut(links, head, p)
	}
	encs, viewable, err := s.readViewLinks(links)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, e := range encs {
			bufpool.Put(e)
		}
	}()
	if !viewable {
		return s.rebuildCut(links, encs[0], BF16)
	}
	var high []byte
	if len(encs) < len(links) {
		bottom := links[len(encs)].c
		if bottom.Delta || bottom.Length > maxZeroRebuild {
			return nil, fmt.Errorf("version %d chunk at %d: %d bytes of zeros as a reference: %w", id, off, bottom.Length, errCorruptManifest)
		}
		high = bufpool.Get(encode.HighLen(int(bottom.Length)))
		clear(high)
	}
	for i := len(encs) - 1; i >= 0; i-- {
		l := links[i]
		hl := encode.HighLen(int(l.c.Length))
		next, err := encode.DecodeHigh16(bufpool.Get(hl)[:0], encs[i], high, i == 0)
		if high != nil {
			bufpool.Put(high)
		}
		if err == nil && len(next) != hl {
			err = fmt.Errorf("%w: high form of %d bytes, want %d", encode.ErrCorrupt, len(next), hl)
		}
		if err != nil {
			bufpool.Put(next)
			if errors.Is(err, encode.ErrChecksum) || errors.Is(err, encode.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", ErrChecksum, err)
			}
			return nil, fmt.Errorf("version %d chunk at %d, view: %w", l.id, l.off, err)
		}
		high = next
		s.rebuilt.Add(1)
	}
	s.viewsFromHigh.Add(1)
	out := make([]byte, links[0].c.Length) // cached, shared: never recycled
	encode.WidenHigh(out, high)
	bufpool.Put(high)
	return out, nil
}

// readViewLinks reads the encodings a view of links needs, top first: down
// to the first chunk of zeros, or to the first chunk DecodeHigh16 cannot
// read (viewable is false then, and it is the last). Where reads cost by
// the byte (a replica), each is a round trip or two to the object store,
// so the links are read at once.
func (s *Store) readViewLinks(links []link) (encs [][]byte, viewable bool, err error) {
	n := len(links)
	for i, l := range links {
		if l.c.Zeros() {
			n = i // a baseline of zeros, at the bottom
			break
		}
	}
	encs = make([][]byte, n)
	errs := make([]error, n)
	if _, sparse := s.data.(storage.SparseReader); sparse && n > 1 {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { encs[i], errs[i] = s.readHighRecords(links[i]) })
		}
		wg.Wait()
	} else {
		for i := range n {
			if encs[i], errs[i] = s.readHighRecords(links[i]); errs[i] != nil || !encode.HighViewable(encs[i]) {
				break
			}
		}
	}
	putFrom := func(j int) {
		for _, e := range encs[j:] {
			if e != nil {
				bufpool.Put(e)
			}
		}
	}
	for i := range n {
		if errs[i] != nil {
			putFrom(0)
			return nil, false, fmt.Errorf("version %d chunk at %d: %w", links[i].id, links[i].off, errs[i])
		}
		if !encode.HighViewable(encs[i]) {
			putFrom(i + 1)
			return encs[:i+1], false, nil
		}
	}
	return encs, true, nil
}

// readHighRecords reads the encoding of link l's chunk for a view. Where
// reads cost by the byte (a replica fetching from the object store) and
// the chunk's version is split16, it reads only what DecodeHigh16 needs,
// skipping the low records: a first read of the share of the chunk the
// last one needed (a little more), and a second of the rest where that
// was short. Elsewhere it reads the whole chunk, which the local device
// reads faster than a prefix with gaps, and which a default codec's view
// needs anyway.
func (s *Store) readHighRecords(l link) ([]byte, error) {
	sparse, ok := s.data.(storage.SparseReader)
	if !ok || l.lay.codec != split16Name {
		return s.readPack(l.lay.pack, l.c.PackOff, l.c.EncLen)
	}
	size, share := l.c.EncLen, &s.highShare[0]
	if l.c.Delta {
		share = &s.highShare[1]
	}
	guess := min(size, max(encode.HighProbeLen, size*share.Load()/4096*9/8+1024))
	buf := bufpool.Get(int(size))
	if err := sparse.ReadAtSparse(l.lay.pack, buf[:guess], l.c.PackOff); err != nil {
		bufpool.Put(buf)
		return nil, err
	}
	need := size // not viewable: the exact rebuild reads it all
	if n, ok := encode.HighPrefixLen(buf[:guess]); ok {
		if int64(n) > size {
			bufpool.Put(buf)
			return nil, fmt.Errorf("%w: chunk header says %d bytes, its record %d", ErrChecksum, n, size)
		}
		need = int64(n)
		share.Store(need * 4096 / size)
	}
	if need > guess {
		if err := sparse.ReadAtSparse(l.lay.pack, buf[guess:need], l.c.PackOff+guess); err != nil {
			bufpool.Put(buf)
			return nil, err
		}
	}
	return buf[:need], nil
}

// rebuildCut is the view at precision p of a chunk rebuilt exact (checked):
// for BF16, one whose chain is not all split16. Float32 chunks are cut or
// rounded. For BF16 the chunks of split16 versions are read by their own
// pages alone, as the view reads the others (readHighRecords): they are
// the odd ones out there (headers, other dtypes), and the fetch blocks
// around them hold low records the view skips. top is the top chunk's
// encoding, or its first bytes (nil: a chunk of zeros, the same in every
// view).
func (s *Store) rebuildCut(links []link, top []byte, p Precision) ([]byte, error) {
	float := false
	if top != nil {
		h, err := encode.InspectPrefix(top)
		if err != nil {
			return nil, fmt.Errorf("version %d chunk at %d: %w: %w", links[0].id, links[0].off, ErrChecksum, err)
		}
		float = h.DType == encode.Float32
	}
	for i := range links {
		links[i].sparse = p == BF16 && links[i].lay.codec == split16Name
	}
	plain, err := s.rebuildLinks(links, false)
	if err != nil {
		return nil, err
	}
	if float {
		p.apply(plain)
	}
	return plain, nil
}

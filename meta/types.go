package meta

import (
	"fmt"

	"github.com/ckptfs/ckptfs/meta/extent"
)

// Ino numbers an inode. The root directory is RootIno; numbers are never reused.
type Ino uint64

// VersionID numbers one committed content of a file. Numbers are never reused.
type VersionID uint64

// RootIno is the inode number of the filesystem's root directory.
const RootIno Ino = 1

// Extent is a run of device logical pages.
type Extent = extent.Extent

// Inode is a file, directory or symlink. Regular files point at the version
// that holds their committed bytes; Size mirrors that version's size.
type Inode struct {
	Ino     Ino
	Mode    uint32 // file type and permission bits, as in stat(2)
	Uid     uint32
	Gid     uint32
	Nlink   uint32
	Rdev    uint32
	Size    int64
	Atime   int64 // nanoseconds since the epoch
	Mtime   int64
	Ctime   int64
	Version VersionID // committed content of a regular file; 0 when empty
	Target  string    // symlink target
}

const inodeRecordVersion = 1

func (n *Inode) marshal() []byte {
	w := recordWriter{b: make([]byte, 0, 64+len(n.Target))}
	w.u8(inodeRecordVersion)
	w.uvarint(uint64(n.Ino))
	w.uvarint(uint64(n.Mode))
	w.uvarint(uint64(n.Uid))
	w.uvarint(uint64(n.Gid))
	w.uvarint(uint64(n.Nlink))
	w.uvarint(uint64(n.Rdev))
	w.varint(n.Size)
	w.varint(n.Atime)
	w.varint(n.Mtime)
	w.varint(n.Ctime)
	w.uvarint(uint64(n.Version))
	w.str(n.Target)
	return w.b
}

func (n *Inode) unmarshal(b []byte) error {
	r := recordReader{b: b}
	r.expectVersion("inode", inodeRecordVersion)
	n.Ino = Ino(r.uvarint())
	n.Mode = uint32(r.uvarint())
	n.Uid = uint32(r.uvarint())
	n.Gid = uint32(r.uvarint())
	n.Nlink = uint32(r.uvarint())
	n.Rdev = uint32(r.uvarint())
	n.Size = r.varint()
	n.Atime = r.varint()
	n.Mtime = r.varint()
	n.Ctime = r.varint()
	n.Version = VersionID(r.uvarint())
	n.Target = r.str()
	return r.err
}

// Version is one immutable content of a file: its bytes are rebuilt from the
// chunks recorded under its ID, whose encoded forms sit in Pack. A version
// stays while it is live (an inode's content) or while later versions delta
// against it (Dependents > 0); when both end it is freed.
type Version struct {
	ID         VersionID
	Ino        Ino    // inode whose content this is (kept after unlink, for reports)
	Family     string // path with digit runs replaced, see chain.FamilyOf
	Ref        VersionID
	Depth      uint32 // deltas between this version and a full baseline
	Size       int64
	Checksum   uint32 // CRC-32C of the whole content
	Pack       []Extent
	PackBytes  int64 // encoded bytes in Pack; pages × page size ≥ PackBytes
	Dependents uint32
	Live       bool
	Codec      string
	Format     string // what the detector recognised
	Created    int64  // nanoseconds since the epoch
	Segments   uint32
	Chunks     uint32
	// Chunk counts by kind, for reports.
	DeltaChunks     uint32
	UnchangedChunks uint32
	TensorBytes     int64 // plain bytes labelled as tensors

	// Record version 2: how the version was made, for reports and for
	// choosing the next save's reference.
	Path          string // the file's path when committed (or renamed since)
	Layout        uint64 // fingerprint of the tensors the file declared (detect.Layout)
	LayoutTensors uint32 // tensors declared; 0: the layout is unknown
	Fallback      bool   // ingested from a draft (staged, re-read) rather than streamed
	RefReason     string // why Ref was chosen: RefSameFile, RefFamily, RefLayout; "" for a baseline

	// Record version 3: the lossy scheme an archive tier applied to the
	// version's tensors (encode.Lossy's name), "" for exact content. Only
	// a lossy version is written as record version 3, so that stores
	// without one keep the format older releases read.
	Fidelity string
}

// Reasons a version's reference was chosen.
const (
	RefSameFile = "same-file" // the file's own previous content (rewritten in place)
	RefFamily   = "family"    // the last version of the path's family
	RefLayout   = "layout"    // the last version with the same tensor layout nearby
	RefRepack   = "repack"    // the previous version of its family, chosen by `ckptfs repack`
)

// versionRecordVersion 2 appends Path, Layout, LayoutTensors, Fallback and
// RefReason; version 1 records read with those empty. Version 3 appends
// Fidelity, and is written only for lossy versions.
const (
	versionRecordVersion      = 2
	lossyVersionRecordVersion = 3
)

// PackPages is the number of device pages the version's pack occupies.
func (v *Version) PackPages() int64 {
	var n int64
	for _, e := range v.Pack {
		n += e.Len
	}
	return n
}

func (v *Version) marshal() []byte {
	w := recordWriter{b: make([]byte, 0, 96+16*len(v.Pack))}
	rv := uint8(versionRecordVersion)
	if v.Fidelity != "" {
		rv = lossyVersionRecordVersion
	}
	w.u8(rv)
	w.uvarint(uint64(v.ID))
	w.uvarint(uint64(v.Ino))
	w.str(v.Family)
	w.uvarint(uint64(v.Ref))
	w.uvarint(uint64(v.Depth))
	w.varint(v.Size)
	w.u32(v.Checksum)
	w.uvarint(uint64(len(v.Pack)))
	for _, e := range v.Pack {
		w.varint(e.Start)
		w.varint(e.Len)
	}
	w.varint(v.PackBytes)
	w.uvarint(uint64(v.Dependents))
	w.bool(v.Live)
	w.str(v.Codec)
	w.str(v.Format)
	w.varint(v.Created)
	w.uvarint(uint64(v.Segments))
	w.uvarint(uint64(v.Chunks))
	w.uvarint(uint64(v.DeltaChunks))
	w.uvarint(uint64(v.UnchangedChunks))
	w.varint(v.TensorBytes)
	w.str(v.Path)
	w.uvarint(v.Layout)
	w.uvarint(uint64(v.LayoutTensors))
	w.bool(v.Fallback)
	w.str(v.RefReason)
	if rv >= lossyVersionRecordVersion {
		w.str(v.Fidelity)
	}
	return w.b
}

func (v *Version) unmarshal(b []byte) error {
	r := recordReader{b: b}
	rv := r.u8()
	if r.err == nil && (rv < 1 || rv > lossyVersionRecordVersion) {
		r.err = fmt.Errorf("%w: version record version %d, want 1 to %d", ErrCorruptRecord, rv, lossyVersionRecordVersion)
	}
	v.ID = VersionID(r.uvarint())
	v.Ino = Ino(r.uvarint())
	v.Family = r.str()
	v.Ref = VersionID(r.uvarint())
	v.Depth = uint32(r.uvarint())
	v.Size = r.varint()
	v.Checksum = r.u32()
	n := r.uvarint()
	if n > uint64(len(r.b)) { // each extent takes at least two bytes
		r.fail("extent count larger than record")
		return r.err
	}
	v.Pack = make([]Extent, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		v.Pack = append(v.Pack, Extent{Start: r.varint(), Len: r.varint()})
	}
	v.PackBytes = r.varint()
	v.Dependents = uint32(r.uvarint())
	v.Live = r.bool()
	v.Codec = r.str()
	v.Format = r.str()
	v.Created = r.varint()
	v.Segments = uint32(r.uvarint())
	v.Chunks = uint32(r.uvarint())
	v.DeltaChunks = uint32(r.uvarint())
	v.UnchangedChunks = uint32(r.uvarint())
	v.TensorBytes = r.varint()
	if rv >= 2 {
		v.Path = r.str()
		v.Layout = r.uvarint()
		v.LayoutTensors = uint32(r.uvarint())
		v.Fallback = r.bool()
		v.RefReason = r.str()
	}
	if rv >= lossyVersionRecordVersion {
		v.Fidelity = r.str()
	}
	return r.err
}

// Segment is a labelled byte range of a version: a tensor (with the key that
// names it in every checkpoint of the family) or raw bytes.
type Segment struct {
	Index  uint32
	Tensor bool
	Key    string
	DType  uint8 // encode.DType; meta does not interpret it
	Offset int64
	Length int64
}

const segmentRecordVersion = 1

func (s *Segment) marshal() []byte {
	w := recordWriter{b: make([]byte, 0, 32+len(s.Key))}
	w.u8(segmentRecordVersion)
	w.uvarint(uint64(s.Index))
	w.bool(s.Tensor)
	w.str(s.Key)
	w.u8(s.DType)
	w.varint(s.Offset)
	w.varint(s.Length)
	return w.b
}

func (s *Segment) unmarshal(b []byte) error {
	r := recordReader{b: b}
	r.expectVersion("segment", segmentRecordVersion)
	s.Index = uint32(r.uvarint())
	s.Tensor = r.bool()
	s.Key = r.str()
	s.DType = r.u8()
	s.Offset = r.varint()
	s.Length = r.varint()
	return r.err
}

// Chunk is the unit of coding: up to a fixed number of elements of one
// segment, encoded on its own (baseline) or against the chunk at RefOffset of
// the version's Ref (delta). A chunk with no encoded bytes (EncLen 0) is
// zeros: a run of zeros written, or a hole nobody wrote (format 4); such a
// chunk is never a delta and has no place in the pack.
type Chunk struct {
	Offset    int64 // file offset of the first plain byte
	Length    int64 // plain bytes
	Segment   uint32
	Index     uint32 // chunk number within its segment
	PackOff   int64  // byte offset of the encoded chunk in the version's pack
	EncLen    int64
	Delta     bool
	RefOffset int64 // file offset of the reference chunk in Version.Ref
}

// End is the file offset after the chunk.
func (c *Chunk) End() int64 { return c.Offset + c.Length }

// Zeros reports whether the chunk is all zeros, stored as nothing.
func (c *Chunk) Zeros() bool { return c.EncLen == 0 }

const chunkRecordVersion = 1

func (c *Chunk) marshal() []byte {
	w := recordWriter{b: make([]byte, 0, 40)}
	w.u8(chunkRecordVersion)
	w.varint(c.Offset)
	w.varint(c.Length)
	w.uvarint(uint64(c.Segment))
	w.uvarint(uint64(c.Index))
	w.varint(c.PackOff)
	w.varint(c.EncLen)
	w.bool(c.Delta)
	w.varint(c.RefOffset)
	return w.b
}

func (c *Chunk) unmarshal(b []byte) error {
	r := recordReader{b: b}
	r.expectVersion("chunk", chunkRecordVersion)
	c.Offset = r.varint()
	c.Length = r.varint()
	c.Segment = uint32(r.uvarint())
	c.Index = uint32(r.uvarint())
	c.PackOff = r.varint()
	c.EncLen = r.varint()
	c.Delta = r.bool()
	c.RefOffset = r.varint()
	return r.err
}

// Family is the history of one checkpoint series (see chain.FamilyOf): the
// version written last and the baseline the current run of deltas started
// from. Sizes feed the `auto` re-baselining rule.
type Family struct {
	Name          string
	Last          VersionID
	Baseline      VersionID
	SinceBaseline uint32 // versions committed after Baseline
	BaselineSize  int64  // logical bytes of the baseline
	BaselineBytes int64  // encoded bytes of the baseline
	LastSize      int64
	LastBytes     int64
	DeltaBytes    int64  // encoded bytes of the deltas since Baseline
	Versions      uint64 // versions ever committed in the family
}

const familyRecordVersion = 1

func (f *Family) marshal() []byte {
	w := recordWriter{b: make([]byte, 0, 64+len(f.Name))}
	w.u8(familyRecordVersion)
	w.str(f.Name)
	w.uvarint(uint64(f.Last))
	w.uvarint(uint64(f.Baseline))
	w.uvarint(uint64(f.SinceBaseline))
	w.varint(f.BaselineSize)
	w.varint(f.BaselineBytes)
	w.varint(f.LastSize)
	w.varint(f.LastBytes)
	w.varint(f.DeltaBytes)
	w.uvarint(f.Versions)
	return w.b
}

func (f *Family) unmarshal(b []byte) error {
	r := recordReader{b: b}
	r.expectVersion("family", familyRecordVersion)
	f.Name = r.str()
	f.Last = VersionID(r.uvarint())
	f.Baseline = VersionID(r.uvarint())
	f.SinceBaseline = uint32(r.uvarint())
	f.BaselineSize = r.varint()
	f.BaselineBytes = r.varint()
	f.LastSize = r.varint()
	f.LastBytes = r.varint()
	f.DeltaBytes = r.varint()
	f.Versions = r.uvarint()
	return r.err
}

// AppendExtents appends exts to dst, merging with the last extent when
// contiguous.
func AppendExtents(dst, exts []Extent) []Extent {
	for _, e := range exts {
		if n := len(dst); n > 0 && dst[n-1].End() == e.Start {
			dst[n-1].Len += e.Len
			continue
		}
		dst = append(dst, e)
	}
	return dst
}

// SubExtents returns the extents holding units [first, first+count) of the
// run of units that exts describe, in order.
func SubExtents(exts []Extent, first, count int64) []Extent {
	var out []Extent
	end := first + count
	var base int64
	for _, e := range exts {
		lo, hi := max(first, base), min(end, base+e.Len)
		if lo < hi {
			out = append(out, Extent{Start: e.Start + lo - base, Len: hi - lo})
		}
		base += e.Len
		if base >= end {
			break
		}
	}
	return out
}

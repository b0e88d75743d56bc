package chain

import (
	"fmt"
	"hash/crc32"
	"path"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/chain/plaincache"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/encode/detect"
	"github.com/ckptfs/ckptfs/meta"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxInFlight bounds the chunks an ingest has submitted but not yet packed:
// memory per ingest is about maxInFlight × (chunk + reference + encoded).
const maxInFlight = 8

// ingest turns a stream of sequential writes into a pending version: it
// labels the bytes, cuts them into chunks, encodes each against the same
// chunk of the reference version, and packs the results onto the device as
// it goes. Nothing is visible until the version is committed.
//
// The reference is chosen when the first tensor bytes arrive, not when the
// file is opened: by then the detector knows the tensor layout the file
// declares, and the file has the name it was renamed to (safetensors
// renames its temporary file before it writes a byte). Raw bytes before
// that need no reference.
type ingest struct {
	s      *Store
	owner  *Writer // the writer it belongs to, if any
	pol    policy.Policy
	target refTarget

	decided   bool
	family    string // the family the reference was chosen for
	refReason string
	layout    detect.Layout
	id        meta.VersionID
	ref       *meta.Version
	refDepth  uint32
	refSeg    map[string]meta.Segment // reference's tensor segments by key

	head    detect.Detector // the detector of the file's start: its format and layout are the file's
	det     detect.Detector // the detector labelling now: head, or one started after a hole
	detBase int64           // file offset of det's stream start
	spans   []detect.Span

	segments []meta.Segment
	cur      int   // index of the open segment in segments, -1 if none
	region   int64 // detector region of the open segment
	label    detect.Label
	chunkBuf []byte
	restBuf  []byte // what followed the first span of a Write into spare's room
	chunkOff int64
	chunkIdx uint32

	queue  []pendingChunk
	chunks []meta.Chunk
	pack   *packWriter

	size        int64
	crc         uint32
	deltas      uint32
	unchanged   uint32
	tensorBytes int64
	err         error
	done        bool
}

// refTarget is what the reference rule knows of the file being written.
type refTarget struct {
	path func() string  // its path now ("" once it has no name)
	prev meta.VersionID // the content it replaces when rewritten in place, else 0
}

func (t refTarget) pathNow() string {
	if t.path == nil {
		return ""
	}
	return t.path()
}

type pendingChunk struct {
	job   *chunkJob
	chunk meta.Chunk
}

// newIngest starts a new version of the file target describes. Its first
// name hints the format (Caffe files have no magic bytes).
func (s *Store) newIngest(target refTarget) *ingest {
	det := detect.New(path.Base(target.pathNow()))
	return &ingest{s: s, pol: s.Policy(), target: target, id: s.newVersionID(),
		head: det, det: det, cur: -1, pack: newPackWriter(s)}
}

// decide chooses and pins the reference (see chooseReference).
func (in *ingest) decide() error {
	in.decided = true
	p := in.target.pathNow()
	in.family = policy.FamilyOf(p)
	// The family's previous save may still be committing (its close
	// returned, its commit runs in the background): it is the reference.
	in.s.committing.wait(in.family, in.owner)
	in.layout = in.head.Layout()
	s := in.s
	// The reference is chosen and pinned with no Update running: an Update
	// freeing it (the last name of its file going) either committed before,
	// and then it is not chosen, or sees the pin and defers the free.
	// Without a reference of its own file or family, a save closed before
	// this one and still committing (of another name, with this layout) may
	// be the one: the choice waits for those commits and is made again.
	var err error
	for waited := false; ; waited = true {
		retry := false
		err = s.db.ViewBetweenUpdates(func(mtx *meta.Tx) error {
			ref, reason, err := s.chooseReference(mtx, refQuery{path: p, family: in.family,
				layout: in.layout, prev: in.target.prev})
			if err != nil {
				return err
			}
			if !waited && (ref == nil || reason == meta.RefLayout) && s.committing.others(in.owner) {
				retry = true
				return nil
			}
			if ref == nil {
				return nil
			}
			return in.useReference(mtx, ref, reason)
		})
		if err != nil || !retry {
			break
		}
		s.committing.waitAll(in.owner)
	}
	if err != nil {
		return fmt.Errorf("choose reference for %s: %w", p, err)
	}
	var refID meta.VersionID
	if in.ref != nil {
		in.refDepth = in.ref.Depth
		refID = in.ref.ID
	}
	s.refs.StartSave(in.family, refID)
	return nil
}

// useReference takes ref as the reference and pins it.
func (in *ingest) useReference(mtx *meta.Tx, ref *meta.Version, reason string) error {
	segs, err := mtx.Segments(ref.ID)
	if err != nil {
		return err
	}
	in.refSeg = make(map[string]meta.Segment, len(segs))
	for _, sg := range segs {
		if sg.Tensor {
			in.refSeg[sg.Key] = sg
		}
	}
	in.ref, in.refReason = ref, reason
	in.s.pin(ref.ID)
	return nil
}

// Size is the number of bytes written so far.
func (in *ingest) Size() int64 { return in.size }

// Write appends p to the version. p may be the start of the room spare
// returned: its bytes are then taken where they lie.
func (in *ingest) Write(p []byte) error {
	if in.err != nil {
		return in.err
	}
	if in.done {
		return fmt.Errorf("ingest: write after finish")
	}
	in.crc = crc32.Update(in.crc, castagnoli, p)
	in.spans = in.det.Label(in.spans[:0], p)
	if in.detBase != 0 {
		for i := range in.spans {
			in.spans[i].Offset += in.detBase
			in.spans[i].Region += in.detBase
		}
	}
	if !in.decided && hasTensor(in.spans) {
		if err := in.decide(); err != nil {
			return in.fail(err)
		}
	}
	base, n := in.size, int64(len(p))
	spans := in.spans
	if in.inSpare(p) {
		first := spans[0]
		continues := in.cur >= 0 && first.Region == in.region && first.Label == in.label
		// What follows the first span is moved out first: the chunk may
		// be handed to the encoders (or, all zeros, back to the pool)
		// before those bytes are taken.
		rest := p[first.Length:]
		if !continues && (len(in.chunkBuf) > 0 ||
			first.Length > int64(in.s.layout.ChunkBytes(first.Kind == detect.Tensor, first.DType))) {
			rest = p // the span starts a chunk elsewhere, or more than one
		}
		if len(rest) > 0 {
			in.restBuf = append(in.restBuf[:0], rest...)
		}
		if len(rest) < len(p) {
			// The first span's bytes are where they belong: they continue
			// the chunk being filled, or start the segment's first chunk
			// in the chunk's empty buffer.
			if !continues {
				in.startSegment(first)
			}
			if err := in.appendData(p[:first.Length]); err != nil {
				return in.fail(err)
			}
			base += first.Length
			spans = spans[1:]
		}
		p = in.restBuf[:len(rest)]
	}
	for _, sp := range spans {
		if in.cur < 0 || sp.Region != in.region || sp.Label != in.label {
			if err := in.endSegment(); err != nil {
				return in.fail(err)
			}
			in.startSegment(sp)
		}
		if err := in.appendData(p[sp.Offset-base : sp.Offset-base+sp.Length]); err != nil {
			return in.fail(err)
		}
	}
	in.size += n
	return nil
}

// holeMin is the run of unwritten zeros from which a hole is stored as one
// chunk of zeros and the detector starts again after it. A shorter run goes
// through the detector as zeros, so that a small gap keeps the file's
// layout; its chunks of zeros cost a scan, not an encoding.
const holeMin = 64 << 20

// zeroBuf is read-only zeros for holes shorter than holeMin.
var zeroBuf = make([]byte, 1<<20)

// Hole appends n zero bytes that nobody wrote (a truncate declared them).
// A long hole costs one chunk record, nothing in the pack and no pass over
// its bytes, so `truncate -s 64G f` commits at once.
func (in *ingest) Hole(n int64) error {
	for n > 0 && n < holeMin {
		k := min(n, int64(len(zeroBuf)))
		if err := in.Write(zeroBuf[:k]); err != nil {
			return err
		}
		n -= k
	}
	if n == 0 {
		return nil
	}
	if in.err != nil {
		return in.err
	}
	if in.done {
		return fmt.Errorf("ingest: hole after finish")
	}
	if err := in.endSegment(); err != nil {
		return in.fail(err)
	}
	in.crc = crc32Zeros(in.crc, n)
	seg := meta.Segment{Index: uint32(len(in.segments)), DType: uint8(encode.Bytes), Offset: in.size, Length: n}
	in.segments = append(in.segments, seg)
	in.cur = -1
	in.queue = append(in.queue, pendingChunk{chunk: meta.Chunk{Offset: in.size, Length: n, Segment: seg.Index}})
	in.size += n
	// What follows is labelled afresh, as if a file started there: the
	// detector's position in the format is lost across bytes it never saw.
	in.det, in.detBase = detect.New(path.Base(in.target.pathNow())), in.size
	return nil
}

func hasTensor(spans []detect.Span) bool {
	for _, sp := range spans {
		if sp.Kind == detect.Tensor {
			return true
		}
	}
	return false
}

func (in *ingest) fail(err error) error {
	if in.err == nil {
		in.err = fmt.Errorf("ingest %s: %w", in.target.pathNow(), err)
	}
	return in.err
}

func (in *ingest) startSegment(sp detect.Span) {
	in.segments = append(in.segments, meta.Segment{Index: uint32(len(in.segments)),
		Tensor: sp.Kind == detect.Tensor, Key: sp.Key, DType: uint8(sp.DType), Offset: sp.Offset})
	in.cur = len(in.segments) - 1
	in.region = sp.Region
	in.label = sp.Label
	in.chunkIdx = 0
	in.chunkOff = sp.Offset
	in.chunkBuf = in.chunkBuf[:0]
}

func (in *ingest) chunkBytes() int {
	seg := &in.segments[in.cur]
	return in.s.layout.ChunkBytes(seg.Tensor, encode.DType(seg.DType))
}

// spare returns the free room of the chunk being filled, for the caller to
// read the next bytes of the file into and pass to Write, which then takes
// them without copying them; nil if no chunk is being filled. A nearly
// full chunk lends its few bytes too: the read that ends it leaves the next
// reads aligned to whole chunks. Only Write may change the room's bytes,
// and only until the next call of any other method.
func (in *ingest) spare() []byte {
	if in.err != nil || in.done || in.cur < 0 {
		return nil
	}
	cb := in.chunkBytes()
	if in.chunkBuf == nil {
		in.chunkBuf = bufpool.Get(cb)[:0]
	}
	if cap(in.chunkBuf) < cb || len(in.chunkBuf) >= cb {
		return nil
	}
	return in.chunkBuf[len(in.chunkBuf):cb]
}

// inSpare reports whether p starts where spare's room does.
func (in *ingest) inSpare(p []byte) bool {
	room := in.chunkBuf[len(in.chunkBuf):cap(in.chunkBuf)]
	return len(p) > 0 && len(p) <= len(room) && &p[0] == &room[0]
}

func (in *ingest) appendData(data []byte) error {
	seg := &in.segments[in.cur]
	seg.Length += int64(len(data))
	if seg.Tensor {
		in.tensorBytes += int64(len(data))
	}
	cb := in.chunkBytes()
	for len(data) > 0 {
		if in.chunkBuf == nil {
			in.chunkBuf = bufpool.Get(cb)[:0]
		}
		n := min(cb-len(in.chunkBuf), len(data))
		if in.inSpare(data[:n]) { // read there by the caller (spare)
			in.chunkBuf = in.chunkBuf[:len(in.chunkBuf)+n]
		} else {
			in.chunkBuf = append(in.chunkBuf, data[:n]...)
		}
		data = data[n:]
		if len(in.chunkBuf) == cb {
			if err := in.submitChunk(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *ingest) endSegment() error {
	if in.cur >= 0 && len(in.chunkBuf) > 0 {
		return in.submitChunk()
	}
	return nil
}

// submitChunk hands the buffered chunk to the workers and packs finished
// chunks, oldest first, once too many are in flight.
func (in *ingest) submitChunk() error {
	seg := &in.segments[in.cur]
	plain := in.chunkBuf
	in.chunkBuf = nil
	c := meta.Chunk{Offset: in.chunkOff, Length: int64(len(plain)), Segment: seg.Index, Index: in.chunkIdx}
	if allZero(plain) {
		// Zeros are stored as nothing (a chunk with no encoded bytes).
		bufpool.Put(plain)
		in.chunkOff += c.Length
		in.chunkIdx++
		in.queue = append(in.queue, pendingChunk{chunk: c})
		return nil
	}
	j := &chunkJob{plain: plain, dtype: encode.DType(seg.DType), done: make(chan struct{})}
	if seg.Tensor {
		j.codec = in.pol.Codec
		if rs, ok := in.refSeg[seg.Key]; ok && rs.DType == seg.DType {
			cb := int64(in.chunkBytes())
			refOff := rs.Offset + int64(in.chunkIdx)*cb
			if refLen := min(cb, rs.Offset+rs.Length-refOff); refLen == c.Length {
				j.refVer, j.refOff = in.ref.ID, refOff
				j.takeRef = in.pol.Scheme == policy.Progressive
				c.RefOffset = refOff
			}
		}
	} else {
		j.codec = in.pol.RawCodec()
		j.dtype = encode.Bytes
	}
	in.chunkOff += c.Length
	in.chunkIdx++
	in.queue = append(in.queue, pendingChunk{job: j, chunk: c})
	in.s.jobs <- j
	for len(in.queue) >= maxInFlight {
		if err := in.collect(); err != nil {
			return err
		}
	}
	return nil
}

// allZero reports whether b holds only zeros; it stops at the first byte
// that is not, which for tensor data is almost always at once.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// collect packs the oldest submitted chunk once it is encoded.
func (in *ingest) collect() error {
	pc := in.queue[0]
	in.queue = in.queue[1:]
	if pc.job == nil { // zeros: nothing to pack
		in.chunks = append(in.chunks, pc.chunk)
		return nil
	}
	<-pc.job.done
	if pc.job.err != nil {
		return pc.job.err
	}
	off, err := in.pack.Append(pc.job.enc)
	bufpool.Put(pc.job.enc)
	if err != nil {
		return err
	}
	c := pc.chunk
	c.PackOff, c.EncLen, c.Delta = off, int64(len(pc.job.enc)), pc.job.delta
	if !c.Delta {
		c.RefOffset = 0
	}
	if pc.job.delta {
		in.deltas++
	}
	if pc.job.unchanged {
		in.unchanged++
	}
	in.chunks = append(in.chunks, c)
	// The next version of the family will want these bytes as references:
	// keeping them saves rebuilding them through the delta chain.
	// Its buffer goes to the tier if kept there, else back to the pool.
	plain := pc.job.plain
	wanted := in.segments[c.Segment].Tensor && (in.pol.Scheme == policy.Progressive || in.ref == nil)
	if wanted && len(plain) < cap(plain)/2 {
		// A file's last, partial chunk: the tier counts the memory a
		// buffer holds, so keep it in one of its size.
		small := append([]byte(nil), plain...)
		bufpool.Put(plain)
		plain = small
	}
	if !wanted || !in.s.refs.Offer(plaincache.Key{V: in.id, Off: c.Offset}, in.family, plain) {
		bufpool.Put(plain)
	}
	return nil
}

// pendingVersion is a finished ingest waiting for its commit.
type pendingVersion struct {
	v        meta.Version
	segments []meta.Segment
	chunks   []meta.Chunk
	pinned   meta.VersionID // reference kept alive until commit or discard
}

// Finish drains the workers and writes the pack's tail. The result is not
// visible until Commit.
func (in *ingest) Finish() (*pendingVersion, error) {
	if in.err != nil {
		return nil, in.err
	}
	if err := in.endSegment(); err != nil {
		return nil, in.fail(err)
	}
	in.dropBuffers()
	for len(in.queue) > 0 {
		if err := in.collect(); err != nil {
			return nil, in.fail(err)
		}
	}
	exts, packBytes, err := in.pack.Finish()
	if err != nil {
		return nil, in.fail(err)
	}
	in.done = true
	pv := &pendingVersion{segments: in.segments, chunks: in.chunks}
	reason := in.refReason
	if in.ref != nil {
		pv.pinned = in.ref.ID
		in.ref = nil // the pin now belongs to pv
	}
	// The version belongs to the family of the name it has now: a file
	// renamed while being written continues its new name's series.
	p := in.target.pathNow()
	layout := in.head.Layout()
	pv.v = meta.Version{ID: in.id, Family: policy.FamilyOf(p), Path: p, Layout: layout.Sum,
		LayoutTensors: uint32(layout.Tensors), Size: in.size, Checksum: in.crc,
		Pack: exts, PackBytes: packBytes, Codec: in.pol.Codec.String(), Format: in.head.Format(),
		Created: in.s.now().UnixNano(), Segments: uint32(len(in.segments)), Chunks: uint32(len(in.chunks)),
		DeltaChunks: in.deltas, UnchangedChunks: in.unchanged, TensorBytes: in.tensorBytes}
	if pv.pinned != 0 && in.deltas > 0 {
		pv.v.Ref = pv.pinned
		pv.v.Depth = in.refDepth + 1
		pv.v.RefReason = reason
	}
	return pv, nil
}

// Abort discards the ingest and gives back its pages.
func (in *ingest) Abort() {
	for len(in.queue) > 0 {
		if j := in.queue[0].job; j != nil {
			<-j.done
			bufpool.Put(j.plain)
		}
		in.queue = in.queue[1:]
	}
	in.dropBuffers()
	in.pack.Abort()
	in.s.refs.DropVersion(in.id)
	in.release()
	in.err = fmt.Errorf("ingest aborted")
}

// dropBuffers gives back the buffer of a chunk never submitted (spare
// may have taken one for bytes that did not come) and drops restBuf.
func (in *ingest) dropBuffers() {
	if in.chunkBuf != nil {
		bufpool.Put(in.chunkBuf)
		in.chunkBuf = nil
	}
	in.restBuf = nil
}

// release drops the pin on the reference.
func (in *ingest) release() {
	if in.ref != nil {
		in.s.unpin(in.ref.ID)
		in.ref = nil
	}
}

package chain

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/ckptfs/ckptfs/chain/bufpool"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// A version is re-coded in place: the same plain bytes, cut into the same
// segments and chunks, encoded again as a baseline or as deltas against
// another version. Versions coded against it address its chunks by file
// offset and rebuild them to the same plain bytes, so they stay valid
// whatever it is coded against: only its own record, chunk records and pack
// change, in one transaction (swapCoding).

// recoded is a version's new coding, written to the backend (or only
// measured) and not yet swapped in.
type recoded struct {
	v        meta.Version // the record as it will be: ID, Pack, PackBytes, Ref, counts
	segments []meta.Segment
	chunks   []meta.Chunk
	old      meta.Version // the record it replaces, as read when re-coding began
}

// recodeJob rebuilds one chunk and encodes it against its new reference.
type recodeJob struct {
	chunk meta.Chunk
	job   chunkJob
}

// recodeOptions say how recode codes a version.
type recodeOptions struct {
	// measureOnly writes nothing: the result's PackBytes is what the
	// coding would store.
	measureOnly bool
	// lossy is an archive tier's scheme: lossySelf applies it to the
	// version's float32 tensor chunks, lossyRef to the reference's, for a
	// reference whose own lossy coding lands in the same transaction.
	lossy     encode.Lossy
	lossySelf bool
	lossyRef  bool
	// lossyMoments, if set, is applied instead of lossy to the tensors
	// whose segment keys are in moments (the version's optimizer moments)
	// or, for the reference's, refMoments.
	lossyMoments        encode.Lossy
	moments, refMoments map[string]bool
	// patches set bytes after the transform: the CRC fields of a zip
	// whose members' bytes the transform changed.
	patches []bytePatch
	// observe, if set, sees the version's final bytes in file order: each
	// chunk's plain bytes, or nil for n zeros.
	observe func(off int64, plain []byte, n int64)
	// background rebuilds at the encoders' lowered priority: a mounted
	// store's tier takes what the training leaves.
	background bool
}

// schemeFor is the scheme of the tensor whose segment key is key, given
// the moments of its version.
func (o recodeOptions) schemeFor(key string, moments map[string]bool) encode.Lossy {
	if !o.lossyMoments.IsZero() && moments[key] {
		return o.lossyMoments
	}
	return o.lossy
}

// bytePatch is bytes to set at a file offset.
type bytePatch struct {
	off int64
	b   []byte
}

// recode encodes version id again against ref (0: as a baseline), with the
// store's codec, keeping the version's segments and chunk layout. Re-coded
// exactly, its bytes must hash to the version's checksum, or it fails. The
// caller swaps a written result in (swapCoding) or gives its pages back
// (dropRecoded).
func (s *Store) recode(id, ref meta.VersionID, o recodeOptions) (*recoded, error) {
	measureOnly := o.measureOnly
	rc := &recoded{}
	var refSeg map[string]meta.Segment
	err := s.view(func(tx *txn) error {
		v, err := tx.mtx.Version(id)
		if err != nil {
			return err
		}
		rc.old = *v
		if rc.segments, err = tx.mtx.Segments(id); err != nil {
			return err
		}
		err = tx.mtx.ForEachChunk(id, func(c *meta.Chunk) error {
			rc.chunks = append(rc.chunks, *c)
			return nil
		})
		if err != nil || ref == 0 {
			return err
		}
		segs, err := tx.mtx.Segments(ref)
		if err != nil {
			return fmt.Errorf("reference %d: %w", ref, err)
		}
		refSeg = make(map[string]meta.Segment, len(segs))
		for _, sg := range segs {
			if sg.Tensor {
				refSeg[sg.Key] = sg
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("re-code version %d: %w", id, err)
	}
	sort.Slice(rc.segments, func(i, j int) bool { return rc.segments[i].Index < rc.segments[j].Index })
	segByIndex := make(map[uint32]meta.Segment, len(rc.segments))
	for _, sg := range rc.segments {
		segByIndex[sg.Index] = sg
	}
	if ref != 0 {
		s.pin(ref)
		defer s.unpin(ref)
	}
	pol := s.Policy()
	pack := newPackWriter(s)
	pack.measureOnly = measureOnly

	// Rebuilding a chunk decodes its chain and encoding it runs the codec:
	// both run on the store's workers' count of goroutines, and the
	// results are packed in chunk order. In flight at once: twice the
	// workers, each holding a chunk, its reference and its encoding.
	inFlight := 2 * s.workers
	queue := make([]*recodeJob, 0, inFlight)
	sem := make(chan struct{}, s.workers)
	var deltas, unchanged uint32
	var crc uint32
	var firstErr error
	transformed, momentsTransformed := false, false
	collect := func() {
		j := queue[0]
		queue = queue[1:]
		<-j.job.done
		if firstErr == nil && j.job.err != nil {
			firstErr = j.job.err
		}
		if firstErr == nil && j.job.plain == nil {
			// Zeros, stored as nothing.
			crc = crc32Zeros(crc, j.chunk.Length)
			if o.observe != nil {
				o.observe(j.chunk.Offset, nil, j.chunk.Length)
			}
			rc.chunks = append(rc.chunks, j.chunk)
		} else if firstErr == nil {
			crc = crc32.Update(crc, castagnoli, j.job.plain)
			if o.observe != nil {
				o.observe(j.chunk.Offset, j.job.plain, j.chunk.Length)
			}
			c := j.chunk
			off, err := pack.Append(j.job.enc)
			if err != nil {
				firstErr = err
			}
			c.PackOff, c.EncLen, c.Delta = off, int64(len(j.job.enc)), j.job.delta
			if !c.Delta {
				c.RefOffset = 0
			}
			if j.job.delta {
				deltas++
			}
			if j.job.unchanged {
				unchanged++
			}
			rc.chunks = append(rc.chunks, c)
		}
		if j.job.plain != nil {
			bufpool.Put(j.job.plain)
		}
		if j.job.enc != nil {
			bufpool.Put(j.job.enc)
		}
	}
	chunks := rc.chunks
	rc.chunks = make([]meta.Chunk, 0, len(chunks))
	for _, c := range chunks {
		if firstErr != nil {
			break
		}
		patched := patchesIn(o.patches, c.Offset, c.Length)
		if c.Zeros() && len(patched) > 0 && c.Length > maxPatchedZeros {
			// A zip's header inside a hole: no real archive has one.
			firstErr = fmt.Errorf("a patch at %d falls in a hole of %d bytes", patched[0].off, c.Length)
			break
		}
		if c.Zeros() && len(patched) == 0 {
			// A run of zeros or a hole: stored as nothing, as before.
			j := &recodeJob{chunk: c}
			j.job.done = make(chan struct{})
			close(j.job.done)
			queue = append(queue, j)
		} else {
			j := &recodeJob{chunk: c}
			j.job.done = make(chan struct{})
			sg, ok := segByIndex[c.Segment]
			if !ok {
				firstErr = fmt.Errorf("chunk at %d: segment %d missing", c.Offset, c.Segment)
				break
			}
			j.job.dtype = encode.DType(sg.DType)
			lossy := o.lossySelf && sg.Tensor && encode.DType(sg.DType) == encode.Float32
			scheme := o.schemeFor(sg.Key, o.moments)
			transformed = transformed || lossy
			momentsTransformed = momentsTransformed || lossy && scheme.Name != o.lossy.Name
			if sg.Tensor {
				j.job.codec = pol.Codec
				if rs, ok := refSeg[sg.Key]; ok && rs.DType == sg.DType {
					// The rule an ingest follows: chunk i of a tensor
					// against chunk i of the reference's tensor of the same
					// key, when both hold as many bytes.
					cb := int64(s.layout.ChunkBytes(true, encode.DType(sg.DType)))
					refOff := rs.Offset + int64(c.Index)*cb
					if refLen := min(cb, rs.Offset+rs.Length-refOff); refLen == c.Length {
						j.job.refVer, j.job.refOff = ref, refOff
						j.chunk.RefOffset = refOff
						if o.lossyRef && encode.DType(sg.DType) == encode.Float32 {
							j.job.refMap = o.schemeFor(rs.Key, o.refMoments).Apply
						}
					}
				}
			} else {
				j.job.codec = pol.RawCodec()
				j.job.dtype = encode.Bytes
			}
			zeros := c.Zeros()
			queue = append(queue, j)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; close(j.job.done) }()
				if o.background {
					defer s.lowerPriority()()
				}
				var plain []byte
				if zeros {
					plain = bufpool.Get(int(j.chunk.Length))[:j.chunk.Length]
					clear(plain)
				} else {
					var err error
					if plain, err = s.rebuild(id, j.chunk.Offset, true); err != nil {
						j.job.err = fmt.Errorf("rebuild chunk at %d: %w", j.chunk.Offset, err)
						return
					}
				}
				if lossy {
					scheme.Apply(plain, plain)
				}
				for _, p := range patched {
					applyPatch(plain, j.chunk.Offset, p)
				}
				j.job.plain = plain
				s.runJob(&j.job)
			}()
		}
		for len(queue) >= inFlight {
			collect()
		}
	}
	for len(queue) > 0 {
		collect()
	}
	exts, packBytes, err := pack.Finish()
	if firstErr == nil {
		firstErr = err
	}
	if firstErr == nil && !transformed && len(o.patches) == 0 && crc != rc.old.Checksum {
		firstErr = fmt.Errorf("%w: re-coded bytes hash to %08x, the version to %08x", ErrChecksum, crc, rc.old.Checksum)
	}
	if firstErr != nil {
		pack.Abort()
		return nil, fmt.Errorf("re-code version %d: %w", id, firstErr)
	}
	v := rc.old
	v.Checksum = crc
	if transformed {
		v.Fidelity = o.lossy.Name
		if momentsTransformed {
			v.Fidelity += "+" + o.lossyMoments.Name // weights bf16, moments m4: "bf16+m4"
		}
	}
	v.Pack, v.PackBytes = exts, packBytes
	v.Codec = pol.Codec.String()
	v.DeltaChunks, v.UnchangedChunks = deltas, unchanged
	v.Chunks = uint32(len(rc.chunks))
	v.Ref, v.Depth, v.RefReason = 0, 0, ""
	if deltas > 0 {
		v.Ref, v.RefReason = ref, meta.RefRepack
	}
	rc.v = v
	return rc, nil
}

// maxPatchedZeros is the longest chunk of zeros recode materializes to
// patch: a chunk of the layout, not a hole.
const maxPatchedZeros = 4 << 20

// patchesIn returns the patches that touch [off, off+n).
func patchesIn(ps []bytePatch, off, n int64) []bytePatch {
	var out []bytePatch
	for _, p := range ps {
		if p.off < off+n && p.off+int64(len(p.b)) > off {
			out = append(out, p)
		}
	}
	return out
}

// applyPatch sets the bytes of p that fall in plain, which starts at file
// offset off.
func applyPatch(plain []byte, off int64, p bytePatch) {
	for i, b := range p.b {
		if at := p.off + int64(i) - off; at >= 0 && at < int64(len(plain)) {
			plain[at] = b
		}
	}
}

// dropRecoded gives back the pages of a re-coding that will not be swapped in.
func (s *Store) dropRecoded(rc *recoded) {
	if rc != nil && len(rc.v.Pack) > 0 {
		s.data.Release(rc.v.Pack)
	}
}

// swapCoding makes rc the version's coding: its chunk records and pack
// replace the old ones, its new reference gains a dependent and its old one
// loses one (and is freed if nothing else needs it), the old pack is freed,
// and every depth and family figure that follows from the chains is
// brought up to date. All of it commits in one synced transaction, or none.
func (tx *txn) swapCoding(rc *recoded) error {
	cur, err := tx.mtx.Version(rc.v.ID)
	if err != nil {
		return err
	}
	if cur.PackBytes != rc.old.PackBytes || cur.Ref != rc.old.Ref || len(cur.Pack) != len(rc.old.Pack) {
		return fmt.Errorf("version %d changed while it was re-coded: %w", rc.v.ID, errBusy)
	}
	nv := rc.v
	nv.Live, nv.Dependents = cur.Live, cur.Dependents
	// The new reference must not be built on this version (versions of
	// concurrent saves may reference one with a higher number).
	for id, hops := nv.Ref, 0; id != 0; hops++ {
		if id == nv.ID || hops > maxChain {
			return fmt.Errorf("version %d: coding it against %d would make a cycle", nv.ID, nv.Ref)
		}
		v, err := tx.mtx.Version(id)
		if err != nil {
			return err
		}
		id = v.Ref
	}
	if nv.Ref != 0 {
		ref, err := tx.mtx.Version(nv.Ref)
		if err != nil {
			return fmt.Errorf("reference %d: %w", nv.Ref, err)
		}
		ref.Dependents++
		if err := tx.mtx.PutVersion(ref); err != nil {
			return err
		}
	}
	if err := tx.s.data.Commit(tx.mtx, nv.Pack); err != nil {
		return err
	}
	if err := tx.mtx.DeleteVersion(nv.ID); err != nil {
		return err
	}
	if err := tx.mtx.PutVersion(&nv); err != nil {
		return err
	}
	for i := range rc.segments {
		if err := tx.mtx.PutSegment(nv.ID, &rc.segments[i]); err != nil {
			return err
		}
	}
	for i := range rc.chunks {
		if err := tx.mtx.PutChunk(nv.ID, &rc.chunks[i]); err != nil {
			return err
		}
	}
	if err := tx.s.data.Free(tx.mtx, cur.Pack); err != nil {
		return fmt.Errorf("free old pack of version %d: %w", nv.ID, err)
	}
	for name, d := range map[string]int64{"stored_bytes": nv.PackBytes - cur.PackBytes,
		"pack_bytes_written": nv.PackBytes, "pack_pages_written": nv.PackPages(),
		"recoded_versions": 1, "recode_pages_written": nv.PackPages()} {
		if err := tx.mtx.AddCounter(name, d); err != nil {
			return err
		}
	}
	if cur.Ref != 0 {
		if err := tx.releaseVersion(cur.Ref, dependentClaim); err != nil {
			return err
		}
	}
	if nv.Checksum != cur.Checksum {
		// New bytes (a lossy tier): what the caches hold of the version
		// is stale.
		s, id := tx.s, nv.ID
		tx.mtx.OnCommit(func() {
			s.rewrites.Add(1) // before the drop: see chunkPlain
			s.cache.DropVersion(id)
			s.refs.DropVersion(id)
		})
	}
	return tx.settleChains()
}

// settleChains recomputes every version's depth from its reference and
// each family's figures from the chain of its newest version.
func (tx *txn) settleChains() error {
	versions := map[meta.VersionID]*meta.Version{}
	err := tx.mtx.ForEachVersion(func(v *meta.Version) error {
		versions[v.ID] = v
		return nil
	})
	if err != nil {
		return err
	}
	depth := map[meta.VersionID]uint32{}
	var depthOf func(id meta.VersionID, hops int) (uint32, error)
	depthOf = func(id meta.VersionID, hops int) (uint32, error) {
		if d, ok := depth[id]; ok {
			return d, nil
		}
		v := versions[id]
		if v == nil {
			return 0, fmt.Errorf("version %d: %w", id, meta.ErrNotFound)
		}
		if hops > maxChain {
			return 0, fmt.Errorf("version %d: reference chain longer than %d", id, maxChain)
		}
		var d uint32
		if v.Ref != 0 {
			rd, err := depthOf(v.Ref, hops+1)
			if err != nil {
				return 0, err
			}
			d = rd + 1
		}
		depth[id] = d
		return d, nil
	}
	ids := make([]meta.VersionID, 0, len(versions))
	for id := range versions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		d, err := depthOf(id, 0)
		if err != nil {
			return err
		}
		if v := versions[id]; v.Depth != d {
			v.Depth = d
			if err := tx.mtx.PutVersion(v); err != nil {
				return err
			}
		}
	}
	var families []*meta.Family
	err = tx.mtx.ForEachFamily(func(f *meta.Family) error {
		families = append(families, f)
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range families {
		last := versions[f.Last]
		if last == nil {
			continue
		}
		g := *f
		g.LastSize, g.LastBytes = last.Size, last.PackBytes
		g.SinceBaseline, g.DeltaBytes, g.Baseline = last.Depth, 0, 0
		v := last
		for v.Ref != 0 && versions[v.Ref] != nil {
			g.DeltaBytes += v.PackBytes
			v = versions[v.Ref]
		}
		g.BaselineSize, g.BaselineBytes = v.Size, v.PackBytes
		if v.Family == f.Name {
			g.Baseline = v.ID // a family points only at its own versions
		}
		if g != *f {
			if err := tx.mtx.PutFamily(&g); err != nil {
				return err
			}
		}
	}
	return nil
}

// errBusy stops a swap that would change a version under a reader, a
// save coded against it, or an open file: an online tier tries again
// later.
var errBusy = errors.New("in use")

// guardRewrite readies tx to swap rcs in while the store is mounted. It
// fails with errBusy if busy reports a file among the affected versions in
// use (they are rcs's versions and every version coded against them,
// directly or not: a read of any of those decodes their chunks), or if one
// of them is pinned. The affected versions are marked until tx ends, so
// that no read starts on them meanwhile. Call it before the swaps,
// and checkDependents after them.
func (tx *txn) guardRewrite(rcs []*recoded, busy func(meta.Ino) bool) error {
	all, dependents, err := tx.versionGraph()
	if err != nil {
		return err
	}
	var affected []meta.VersionID
	seen := map[meta.VersionID]bool{}
	queue := make([]meta.VersionID, 0, len(rcs))
	for _, rc := range rcs {
		queue = append(queue, rc.v.ID)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		affected = append(affected, id)
		queue = append(queue, dependents[id]...)
	}
	// Marked first: a file opened after busy said no then waits for the
	// transaction to open its version (OpenVersion), and reads it as the
	// transaction leaves it.
	if err := tx.s.markRewriting(tx.mtx, affected); err != nil {
		return err
	}
	if busy != nil {
		for _, id := range affected {
			if v := all[id]; v != nil && v.Live && busy(v.Ino) {
				return fmt.Errorf("%s is open: %w", v.Path, errBusy)
			}
		}
	}
	return nil
}

// checkDependents fails with errBusy if, after rcs were swapped in, a
// version is still coded against one whose bytes they changed: its deltas
// would decode against bytes that are not those it was coded against (a
// save committed against it meanwhile).
func (tx *txn) checkDependents(rcs []*recoded) error {
	_, dependents, err := tx.versionGraph()
	if err != nil {
		return err
	}
	swapped := make(map[meta.VersionID]bool, len(rcs))
	for _, rc := range rcs {
		swapped[rc.v.ID] = true
	}
	for _, rc := range rcs {
		if rc.v.Checksum == rc.old.Checksum {
			continue
		}
		for _, d := range dependents[rc.v.ID] {
			if !swapped[d] {
				return fmt.Errorf("version %d is coded against %d, whose bytes changed: %w", d, rc.v.ID, errBusy)
			}
		}
	}
	return nil
}

// versionGraph is every version, and the versions coded against each.
func (tx *txn) versionGraph() (map[meta.VersionID]*meta.Version, map[meta.VersionID][]meta.VersionID, error) {
	all := map[meta.VersionID]*meta.Version{}
	dependents := map[meta.VersionID][]meta.VersionID{}
	err := tx.mtx.ForEachVersion(func(v *meta.Version) error {
		all[v.ID] = v
		if v.Ref != 0 {
			dependents[v.Ref] = append(dependents[v.Ref], v.ID)
		}
		return nil
	})
	return all, dependents, err
}

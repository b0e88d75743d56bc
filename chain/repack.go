package chain

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// Repack re-plans a finished run: for each family it chooses which of its
// files are stored whole and which as deltas against one of the files saved
// just before them (planTree), so that the family's stored bytes are least
// while no read decodes more than MaxDepth+1 chunks per chunk (PAS-PT's
// problem, ModelHub, restricted to a window of earlier saves). A family
// whose current coding already keeps the bound and stores no more than the
// plan is left alone.
//
// The plan needs each file's size coded whole and as a delta against the
// files of its window; those the store does not hold already are measured
// by encoding without writing. Each version the plan changes is then re-coded
// (recode) and swapped in by its own synced transaction (swapCoding), oldest
// first, so a kill at any moment leaves a store whose every file reads as
// before: versions already swapped, the others as they were. Hidden versions
// (kept only because deltas needed them) are freed once nothing needs them.
func (s *Store) Repack(o RepackOptions) (*RepackReport, error) {
	if o.MaxDepth < 0 {
		return nil, fmt.Errorf("repack: max depth %d must be at least 0", o.MaxDepth)
	}
	if o.Window < 0 {
		return nil, fmt.Errorf("repack: window %d must be at least 0", o.Window)
	}
	rep := &RepackReport{MaxDepth: o.MaxDepth, Window: planWindow(o.MaxDepth, o.Window), DryRun: o.DryRun, Lossy: o.Lossy.Name, Bound: o.Lossy.Bound}
	if !o.LossyMoments.IsZero() {
		if o.Lossy.IsZero() {
			return nil, fmt.Errorf("repack: a scheme for optimizer moments needs a tier")
		}
		rep.Lossy += "+" + o.LossyMoments.Name
		rep.Bound += "; the optimizer moments of torch.save files (" + strings.Join(slices.Sorted(maps.Keys(momentNames)), ", ") +
			"): " + o.LossyMoments.Bound
	}
	for _, p := range o.Families {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("repack: family pattern %q: %w", p, err)
		}
	}
	if o.ExactNewest < 0 || o.ExactEvery < 0 {
		return nil, fmt.Errorf("repack: exact tier of the newest %d and every %d-th", o.ExactNewest, o.ExactEvery)
	}
	if o.Online && (o.Lossy.IsZero() || o.ExactNewest < 1 || o.DryRun || o.Codec != nil) {
		return nil, fmt.Errorf("tier: an online tier needs a scheme and keeps the newest file of each family exact")
	}
	if o.Codec != nil {
		if o.DryRun {
			return nil, fmt.Errorf("repack: a codec change is not measured by a dry run")
		}
		if err := s.OverridePolicy(policy.Policy{Codec: *o.Codec}, []string{"codec"}); err != nil {
			return nil, fmt.Errorf("repack: codec %s: %w", *o.Codec, err)
		}
		rep.Codec = o.Codec.String()
	}
	before, err := s.chainFigures()
	if err != nil {
		return nil, err
	}
	rep.StoredBefore, rep.WorstDecodesBefore, rep.VersionsBefore = before.stored, before.worst, before.versions
	for _, fam := range before.families() {
		if !o.selects(fam) {
			continue
		}
		if o.Stopped != nil && o.Stopped() {
			break
		}
		var row *RepackFamily
		if o.Online {
			row, err = s.tierFamilyOnline(fam, before.byFamily[fam], o, rep)
			if errors.Is(err, errBusy) {
				logrus.Debugf("tier %s: waits: %v", fam, err)
				rep.Waiting++
				err = nil
			}
		} else {
			row, err = s.repackFamily(fam, before.byFamily[fam], o, rep)
		}
		if row != nil && (!o.Online || row.Recoded > 0) {
			rep.Families = append(rep.Families, *row)
		}
		if err != nil {
			return rep, err
		}
	}
	after, err := s.chainFigures()
	if err != nil {
		return rep, err
	}
	rep.StoredAfter, rep.WorstDecodesAfter, rep.VersionsAfter = after.stored, after.worst, after.versions
	return rep, nil
}

// RepackOptions says how Repack plans.
type RepackOptions struct {
	// MaxDepth bounds the deltas between any file and its baseline: a read
	// decodes at most MaxDepth+1 chunks per chunk. 0 stores every file whole.
	MaxDepth int
	// DryRun plans and measures, and writes nothing.
	DryRun bool
	// Families, if set, limits the repack to the families whose names
	// match one of these patterns (path.Match, as `ckptfs stats` prints
	// the names: run/checkpoint-#/model.safetensors).
	Families []string
	// Lossy, if set, is an archive tier: the files outside the exact tier
	// are re-coded with it, and marked (meta.Version.Fidelity). A file
	// whose format cannot stay valid keeps exact. LossyMoments, if set, is
	// the scheme of the optimizer moments of torch.save files instead
	// (momentNames; marked "bf16+m4").
	Lossy        encode.Lossy
	LossyMoments encode.Lossy
	// ExactNewest and ExactEvery say which files of each family stay
	// exact under Lossy: the newest ExactNewest, and every ExactEvery-th in
	// save order (0: none).
	ExactNewest, ExactEvery int
	// Window is how many of the files saved just before a file the plan
	// may code it against (1: the one before only, chains); 0 chooses 4,
	// narrowed where MaxDepth would make the plan's states too many.
	Window int
	// Codec, if set, becomes the store's tensor codec (recorded, as a
	// mount's --codec is), and every exact file coded otherwise is re-coded
	// with it: split16 (encode.Split16) lets the precision view decode the
	// high planes alone.
	Codec *encode.Codec
	// Online tiers a mounted store (a mount's --tier): only the files
	// that left the exact tier are re-coded, each against the reference it
	// has, and a file waits while an exact file other than an every
	// ExactEvery-th (rebased) is coded against it. Busy reports a file
	// that is open or read: it waits too, and is asked again, with every
	// file whose reads decode the versions a swap changes, inside the
	// swap's transaction.
	Online bool
	Busy   func(ino meta.Ino) bool
	// Stopped, if set, is asked between families and between a tier's
	// parts: true ends the repack there (an unmount), every file valid.
	Stopped func() bool
	// afterSwap, in tests, runs after each version is swapped in; an error
	// stops the repack there, as a kill would.
	afterSwap func(swapped int) error
}

// selects reports whether family name is one Repack works on.
func (o RepackOptions) selects(name string) bool {
	if len(o.Families) == 0 {
		return true
	}
	for _, p := range o.Families {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// RepackReport is what Repack did, for `ckptfs repack`.
type RepackReport struct {
	MaxDepth int  `json:"max_depth"`
	Window   int  `json:"window"`
	DryRun   bool `json:"dry_run"`
	// Lossy and Bound: the tier's scheme and what it keeps ("" exact).
	Lossy string `json:"lossy,omitempty"`
	Bound string `json:"bound,omitempty"`
	// Codec is the tensor codec the repack changed the store to ("" none).
	Codec    string         `json:"codec,omitempty"`
	Families []RepackFamily `json:"families"`
	// Stored bytes (encoded, every version kept) and the most chunks a read
	// of any file decodes per chunk, before and after.
	StoredBefore       int64 `json:"stored_bytes_before"`
	StoredAfter        int64 `json:"stored_bytes_after"`
	WorstDecodesBefore int   `json:"worst_decodes_before"`
	WorstDecodesAfter  int   `json:"worst_decodes_after"`
	VersionsBefore     int   `json:"versions_before"`
	VersionsAfter      int   `json:"versions_after"`
	// Measured counts codings encoded without writing to plan; Recoded the
	// versions re-coded and written; PackPagesWritten their device pages.
	// Waiting (Online): families left for a later pass, a file being in use.
	Waiting          int   `json:"families_waiting,omitempty"`
	Measured         int   `json:"codings_measured"`
	Recoded          int   `json:"versions_recoded"`
	PackPagesWritten int64 `json:"pack_pages_written"`
}

// RepackFamily is one family's plan.
type RepackFamily struct {
	Name  string `json:"name"`
	Files int    `json:"files"`
	// StoredBefore counts the family's files and the hidden versions
	// their chains need; Planned the plan's files alone.
	StoredBefore        int64 `json:"stored_bytes_before"`
	Planned             int64 `json:"stored_bytes_planned"`
	WorstDecodesBefore  int   `json:"worst_decodes_before"`
	WorstDecodesPlanned int   `json:"worst_decodes_planned"`
	Baselines           int   `json:"baselines_planned"`
	// FarDeltas: planned deltas against a file saved before the one just
	// before them (a tree, not a chain).
	FarDeltas int `json:"deltas_further_back"`
	// Kept: the family's coding stays (it keeps the bound and the plan
	// stores no less). Recoded: versions re-coded.
	Kept    bool `json:"kept"`
	Recoded int  `json:"recoded"`
	// Under a tier: files lossy after the repack, those made lossy by it,
	// and those left exact because their format cannot stay valid.
	Lossy      int `json:"lossy_files"`
	Tiered     int `json:"tiered_now"`
	Untierable int `json:"left_exact_format"`
}

// chainFigures is the store's versions grouped for planning.
type chainFigures struct {
	stored   int64
	worst    int
	versions int
	byFamily map[string]*familyVersions
}

type familyVersions struct {
	files  []meta.Version // live versions in commit order
	stored int64          // encoded bytes of the files and the hidden versions their chains need
}

func (c *chainFigures) families() []string {
	names := make([]string, 0, len(c.byFamily))
	for n := range c.byFamily {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *Store) chainFigures() (*chainFigures, error) {
	c := &chainFigures{byFamily: map[string]*familyVersions{}}
	all := map[meta.VersionID]*meta.Version{}
	err := s.view(func(tx *txn) error {
		return tx.mtx.ForEachVersion(func(v *meta.Version) error {
			all[v.ID] = v
			c.versions++
			c.stored += v.PackBytes
			if !v.Live {
				return nil
			}
			f := c.byFamily[v.Family]
			if f == nil {
				f = &familyVersions{}
				c.byFamily[v.Family] = f
			}
			f.files = append(f.files, *v)
			f.stored += v.PackBytes
			c.worst = max(c.worst, int(v.Depth)+1)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("repack: %w", err)
	}
	// A family's files also cost the hidden versions their chains need
	// (the earlier contents of files rewritten in place or deleted, which
	// may sit in another family): each is counted once per family.
	for _, f := range c.byFamily {
		seen := map[meta.VersionID]bool{}
		for _, v := range f.files {
			for id, hops := v.Ref, 0; id != 0 && hops < maxChain; hops++ {
				ref := all[id]
				if ref == nil || ref.Live || seen[id] {
					break
				}
				seen[id] = true
				f.stored += ref.PackBytes
				id = ref.Ref
			}
		}
	}
	return c, nil
}

// noCoding is the cost of a coding that cannot be: a delta between files
// with no tensor chunk in common.
const noCoding = math.MaxInt64 / 4

func (s *Store) repackFamily(name string, fam *familyVersions, o RepackOptions, rep *RepackReport) (*RepackFamily, error) {
	files := fam.files
	row := &RepackFamily{Name: name, Files: len(files), StoredBefore: fam.stored}
	worstBefore := 0
	for _, v := range files {
		worstBefore = max(worstBefore, int(v.Depth))
	}
	row.WorstDecodesBefore = worstBefore + 1

	// The tier: which files become lossy now, and the two sequences the
	// plan chains separately, so that no exact file is ever coded against
	// a lossy one.
	plans := make([]filePlan, len(files))
	var exactSeq, lossySeq []int
	for i, v := range files {
		plans[i].v = v
		switch {
		case v.Fidelity != "":
			plans[i].lossy = true
		case !o.Lossy.IsZero() && !o.keepsExact(i, len(files)):
			ok, members, err := s.tierable(v)
			if err != nil {
				return row, err
			}
			if ok {
				plans[i].lossy, plans[i].tiering, plans[i].zip = true, true, members
				if plans[i].moments, err = s.tierMoments(v, members, o); err != nil {
					return row, err
				}
				row.Tiered++
			} else if v.TensorBytes > 0 {
				row.Untierable++
			}
		}
		if plans[i].lossy {
			lossySeq = append(lossySeq, i)
			row.Lossy++
		} else {
			exactSeq = append(exactSeq, i)
		}
	}
	var planned int64
	for k, seq := range [][]int{exactSeq, lossySeq} {
		total, err := s.planSequence(plans, seq, k == 1, o, rep)
		if err != nil {
			return row, err
		}
		planned += total
	}
	row.Planned = planned
	for _, p := range plans {
		row.WorstDecodesPlanned = max(row.WorstDecodesPlanned, p.depth+1)
		if p.depth == 0 {
			row.Baselines++
		}
		if p.far {
			row.FarDeltas++
		}
	}
	codec := s.Policy().Codec.String()
	recoding := 0 // exact files the codec change re-codes
	if o.Codec != nil {
		for _, i := range exactSeq {
			if plans[i].v.Codec != codec {
				recoding++
			}
		}
	}
	if row.Tiered == 0 && recoding == 0 && worstBefore <= o.MaxDepth && planned >= fam.stored {
		row.Kept = true
		return row, nil
	}
	if o.DryRun {
		return row, nil
	}
	if row.Tiered > 0 {
		if err := s.rebaseOutsiders(plans, o, rep, row); err != nil {
			return row, err
		}
	}
	// Exact files first, one transaction each: lossless, so safe in any
	// order, and afterwards none of them is coded against a file about to
	// turn lossy.
	for _, i := range exactSeq {
		p := plans[i]
		if p.v.Ref == p.want && (o.Codec == nil || p.v.Codec == codec) {
			continue
		}
		if err := s.recodeAndSwap(p.v, p.want, recodeOptions{}, o, rep, row); err != nil {
			return row, err
		}
	}
	return row, s.applyLossy(plans, lossySeq, o, rep, row)
}

// filePlan is one file's part in its family's plan.
type filePlan struct {
	v       meta.Version
	lossy   bool            // in the lossy sequence (already lossy, or tiering)
	tiering bool            // becomes lossy now
	zip     []zipMember     // its zip members, whose CRCs the tier rewrites
	patches []bytePatch     // those CRC fields, once measured
	moments map[string]bool // segment keys of its optimizer moments (LossyMoments)
	depth   int             // planned
	ref     int             // planned reference: its index in plans, or -1
	far     bool            // planned against a file before the one just before it
	want    meta.VersionID
}

// lossyOptions are the re-coding options of p under the tier of o, coded
// against ref (nil: none, or a file outside the plan).
func (o RepackOptions) lossyOptions(p *filePlan, ref *filePlan) recodeOptions {
	opts := recodeOptions{lossy: o.Lossy, lossyMoments: o.LossyMoments, lossySelf: p.tiering, moments: p.moments}
	if ref != nil {
		opts.lossyRef, opts.refMoments = ref.tiering, ref.moments
	}
	return opts
}

// tierMoments are the segment keys of v's optimizer moments, if the tier
// has a scheme of their own (LossyMoments).
func (s *Store) tierMoments(v meta.Version, members []zipMember, o RepackOptions) (map[string]bool, error) {
	if o.LossyMoments.IsZero() {
		return nil, nil
	}
	return s.momentKeys(v, members)
}

// keepsExact reports whether file i of n stays in the exact tier: one of
// the newest ExactNewest, or every ExactEvery-th.
func (o RepackOptions) keepsExact(i, n int) bool {
	return i >= n-o.ExactNewest || (o.ExactEvery > 0 && (i+1)%o.ExactEvery == 0)
}

// tierableFormats are the formats whose float32 tensors a tier can round
// and leave a valid file of the same format: no checksum over the data, or
// a zip's, which the tier rewrites. A format detected by heuristics
// ("generic", "+generic") is not: its "tensors" are a guess. Nor is a DCP
// file: several archives, whose directories are not all at its end.
var tierableFormats = map[string]bool{"safetensors": true, "npy": true, "torch-zip": true, "npz": true,
	"torch-legacy": true, "caffe": true}

// tierable reports whether version v can be tiered, and a zip's members.
func (s *Store) tierable(v meta.Version) (bool, []zipMember, error) {
	if v.TensorBytes == 0 || !tierableFormats[v.Format] {
		return false, nil, nil
	}
	if v.Format != "torch-zip" && v.Format != "npz" {
		return true, nil, nil
	}
	r, err := s.OpenVersion(v.ID)
	if err != nil {
		return false, nil, err
	}
	members, err := zipMembers(func(p []byte, off int64) error {
		_, err := r.ReadAt(p, off)
		if err == io.EOF && off+int64(len(p)) <= r.Size() {
			err = nil
		}
		return err
	}, r.Size())
	if errors.Is(err, errNotZip) {
		logrus.Warnf("repack: %s keeps exact: its zip directory cannot be patched: %v", v.Path, err)
		return false, nil, nil
	}
	return err == nil, members, err
}

// planSequence plans the files seq of plans (indices in save order) as one
// sequence: each whole or a delta against one of the window files before it
// in seq (planTree). Deltas against files further back are measured only
// while the file measured last codes it smaller than whole. A lossy
// sequence whose tree would join more than maxLossyPart files in one part
// (applyLossy) is planned as chains instead.
func (s *Store) planSequence(plans []filePlan, seq []int, lossy bool, o RepackOptions, rep *RepackReport) (int64, error) {
	window := planWindow(o.MaxDepth, o.Window)
	whole := make([]int64, len(seq))
	delta := make([][]int64, len(seq))
	for k, i := range seq {
		p := &plans[i]
		var zc *zipCRCs
		opts := o.lossyOptions(p, nil)
		if p.tiering && p.zip != nil {
			zc = newZipCRCs(p.zip)
			opts.observe = zc.observe
		}
		size, err := s.codingSize(p.v, 0, opts, rep)
		if err != nil {
			return 0, err
		}
		if zc != nil {
			p.patches = zc.patches()
		}
		whole[k] = size
		delta[k] = make([]int64, window)
		for g := range delta[k] {
			delta[k][g] = noCoding
		}
		if o.MaxDepth == 0 || p.v.TensorBytes == 0 {
			continue
		}
		last := int64(-1) // the size against the file measured last
		for g := 1; g <= window && g <= k; g++ {
			if last >= whole[k] {
				break // further back codes no smaller
			}
			ref := plans[seq[k-g]]
			if ref.v.TensorBytes == 0 {
				continue
			}
			opts = o.lossyOptions(p, &ref)
			if delta[k][g-1], err = s.codingSize(p.v, ref.v.ID, opts, rep); err != nil {
				return 0, err
			}
			last = delta[k][g-1]
		}
	}
	refs, depths, total := planTree(whole, delta, o.MaxDepth, window)
	if lossy && maxPart(refs) > maxLossyPart(o.MaxDepth) {
		// A tier swaps each part in one transaction: keep them small.
		refs, depths, total = planTree(whole, delta, o.MaxDepth, 1)
	}
	for k, i := range seq {
		p := &plans[i]
		p.depth, p.ref, p.want = depths[k], -1, 0
		if refs[k] >= 0 {
			p.ref, p.far = seq[refs[k]], refs[k] < k-1
			p.want = plans[p.ref].v.ID
		}
	}
	return total, nil
}

// recodeAndSwap re-codes v against want and swaps it in, one transaction.
func (s *Store) recodeAndSwap(v meta.Version, want meta.VersionID, opts recodeOptions, o RepackOptions, rep *RepackReport, row *RepackFamily) error {
	rc, err := s.recode(v.ID, want, opts)
	if err != nil {
		return err
	}
	err = s.update(func(tx *txn) error {
		if err := tx.guardRewrite([]*recoded{rc}, o.Busy); err != nil {
			return err
		}
		if err := tx.swapCoding(rc); err != nil {
			return err
		}
		return tx.checkDependents([]*recoded{rc})
	})
	if err != nil {
		s.dropRecoded(rc)
		return fmt.Errorf("repack %s: %w", v.Path, err)
	}
	s.noteRecoded(rc, want, row, rep)
	if o.afterSwap != nil {
		return o.afterSwap(rep.Recoded)
	}
	return nil
}

func (s *Store) noteRecoded(rc *recoded, want meta.VersionID, row *RepackFamily, rep *RepackReport) {
	row.Recoded++
	rep.Recoded++
	rep.PackPagesWritten += rc.v.PackPages()
	logrus.Debugf("repack: version %d (%s) re-coded against %d (%s): %d -> %d bytes", rc.v.ID, rc.v.Path, want,
		FidelityOf(&rc.v), rc.old.PackBytes, rc.v.PackBytes)
}

// rebaseOutsiders re-codes as baselines (losslessly) the versions outside
// the family's plan that are coded against a file about to turn lossy:
// another family's file, or a hidden version something outside the lossy
// sequence still needs. Their bytes must not change under them.
func (s *Store) rebaseOutsiders(plans []filePlan, o RepackOptions, rep *RepackReport, row *RepackFamily) error {
	tiering, planned := map[meta.VersionID]bool{}, map[meta.VersionID]bool{}
	lossyFiles := map[meta.VersionID]bool{}
	for _, p := range plans {
		planned[p.v.ID] = true
		if p.tiering {
			tiering[p.v.ID] = true
		}
		if p.lossy {
			lossyFiles[p.v.ID] = true
		}
	}
	var outsiders []meta.Version
	err := s.view(func(tx *txn) error {
		all, dependents, err := tx.versionGraph()
		if err != nil {
			return err
		}
		for id, v := range all {
			if !tiering[v.Ref] || planned[id] {
				continue
			}
			// A hidden version that only lossy files of the plan need
			// is freed when they are re-coded: no need to rebase it.
			doomed := !v.Live
			for _, d := range dependents[id] {
				doomed = doomed && lossyFiles[d]
			}
			if !doomed {
				outsiders = append(outsiders, *v)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(outsiders, func(i, j int) bool { return outsiders[i].ID < outsiders[j].ID })
	for _, v := range outsiders {
		if err := s.recodeAndSwap(v, 0, recodeOptions{}, o, rep, row); err != nil {
			return err
		}
	}
	return nil
}

// applyLossy re-codes the lossy sequence to its plan: the files that turn
// lossy and every lossy file whose reference changes. A lossy file's new
// bytes differ from those its current dependents were coded against, so a
// file and the files coded against it must change together. The sequence
// is cut where no planned delta crosses (each part a tree of the plan, or
// several interleaved), and the parts are swapped in one transaction each,
// newest first: a file's current dependents are the files saved after it,
// and by then those are re-coded against files of their own part, so no
// part still needs the bytes of an older one. A kill between two
// transactions leaves the newer parts lossy and the older ones as they
// were, every file valid and marked; memory and a transaction hold one
// part, not the family.
func (s *Store) applyLossy(plans []filePlan, seq []int, o RepackOptions, rep *RepackReport, row *RepackFamily) error {
	for _, part := range planParts(seqRefs(plans, seq)) {
		if o.Stopped != nil && o.Stopped() {
			return nil
		}
		if err := s.applyLossyPart(plans, seq[part[0]:part[1]], o, rep, row); err != nil {
			return err
		}
	}
	return nil
}

// seqRefs is the planned reference of each file of seq as its position in
// seq (-1: stored whole).
func seqRefs(plans []filePlan, seq []int) []int {
	pos := make(map[int]int, len(seq)) // index in plans -> position in seq
	for k, i := range seq {
		pos[i] = k
	}
	refs := make([]int, len(seq))
	for k, i := range seq {
		refs[k] = -1
		if r, ok := pos[plans[i].ref]; ok {
			refs[k] = r // (a reference outside seq is exact: no part crosses to it)
		}
	}
	return refs
}

// applyLossyPart re-codes part, files of the lossy sequence that no planned
// delta from outside it references, and swaps them in with one transaction.
func (s *Store) applyLossyPart(plans []filePlan, part []int, o RepackOptions, rep *RepackReport, row *RepackFamily) error {
	var pending []*recoded
	var wants []meta.VersionID
	drop := func() {
		for _, rc := range pending {
			s.dropRecoded(rc)
		}
	}
	for _, i := range part {
		p := plans[i]
		refChanges := p.ref >= 0 && plans[p.ref].tiering
		if !p.tiering && p.v.Ref == p.want && !refChanges {
			continue
		}
		var ref *filePlan
		if p.ref >= 0 {
			ref = &plans[p.ref]
		}
		opts := o.lossyOptions(&p, ref)
		opts.patches, opts.background = p.patches, o.Online
		rc, err := s.recode(p.v.ID, p.want, opts)
		if err != nil {
			drop()
			return err
		}
		pending = append(pending, rc)
		wants = append(wants, p.want)
	}
	if len(pending) == 0 {
		return nil
	}
	now := s.now().UnixNano()
	err := s.update(func(tx *txn) error {
		if err := tx.guardRewrite(pending, o.Busy); err != nil {
			return err
		}
		for _, rc := range pending {
			if err := tx.swapCoding(rc); err != nil {
				return err
			}
			if rc.v.Fidelity == rc.old.Fidelity {
				continue
			}
			// The content changed: its inode's change time says so.
			n, err := tx.mtx.Inode(rc.v.Ino)
			if err != nil {
				return err
			}
			n.Ctime = max(n.Ctime, now)
			if err := tx.mtx.PutInode(n); err != nil {
				return err
			}
			if err := tx.mtx.AddCounter("lossy_versions", 1); err != nil {
				return err
			}
		}
		return tx.checkDependents(pending)
	})
	if err != nil {
		drop()
		return fmt.Errorf("repack: tier %s: %w", row.Name, err)
	}
	for k, rc := range pending {
		s.noteRecoded(rc, wants[k], row, rep)
	}
	if o.afterSwap != nil {
		return o.afterSwap(rep.Recoded)
	}
	return nil
}

// codingSize is the encoded size of version v coded against ref (0: whole)
// with opts: its pack size when it is coded so now, else measured. A delta
// that codes no chunk against ref costs noCoding (it is a baseline, counted
// as one).
func (s *Store) codingSize(v meta.Version, ref meta.VersionID, opts recodeOptions, rep *RepackReport) (int64, error) {
	if v.Ref == ref && !opts.lossySelf && !opts.lossyRef && v.Codec == s.Policy().Codec.String() {
		return v.PackBytes, nil
	}
	opts.measureOnly = true
	rc, err := s.recode(v.ID, ref, opts)
	if err != nil {
		return 0, fmt.Errorf("repack: measure %s: %w", v.Path, err)
	}
	rep.Measured++
	if ref != 0 && rc.v.Ref == 0 {
		return noCoding, nil
	}
	return rc.v.PackBytes, nil
}

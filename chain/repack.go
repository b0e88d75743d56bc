package chain

import (
	"fmt"
	"math"
	"sort"

	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// Repack re-plans a finished run: for each family it chooses which of its
// files are stored whole and which as deltas against the file saved before
// them, so that the family's stored bytes are least while no read decodes
// more than MaxDepth+1 chunks per chunk (PAS-PT's problem, ModelHub,
// restricted to chains of saves in order). A family whose current coding
// already keeps the bound and stores no more than the plan is left alone.
//
// The plan needs each file's size coded whole and as a delta against its
// predecessor; those the store does not hold already are measured by
// encoding without writing. Each version the plan changes is then re-coded
// (recode) and swapped in by its own synced transaction (swapCoding), oldest
// first, so a kill at any moment leaves a store whose every file reads as
// before: versions already swapped, the others as they were. Hidden versions
// (kept only because deltas needed them) are freed once nothing needs them.
func (s *Store) Repack(o RepackOptions) (*RepackReport, error) {
	if o.MaxDepth < 0 {
		return nil, fmt.Errorf("repack: max depth %d must be at least 0", o.MaxDepth)
	}
	rep := &RepackReport{MaxDepth: o.MaxDepth, DryRun: o.DryRun}
	before, err := s.chainFigures()
	if err != nil {
		return nil, err
	}
	rep.StoredBefore, rep.WorstDecodesBefore, rep.VersionsBefore = before.stored, before.worst, before.versions
	for _, fam := range before.families() {
		row, err := s.repackFamily(fam, before.byFamily[fam], o, rep)
		if row != nil {
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
	// afterSwap, in tests, runs after each version is swapped in; an error
	// stops the repack there, as a kill would.
	afterSwap func(swapped int) error
}

// RepackReport is what Repack did, for `ckptfs repack`.
type RepackReport struct {
	MaxDepth int            `json:"max_depth"`
	DryRun   bool           `json:"dry_run"`
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
	// Kept: the family's coding stays (it keeps the bound and the plan
	// stores no less). Recoded: versions re-coded.
	Kept    bool `json:"kept"`
	Recoded int  `json:"recoded"`
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
	whole := make([]int64, len(files))
	delta := make([]int64, len(files))
	for i, v := range files {
		size, err := s.codingSize(v, 0, rep)
		if err != nil {
			return row, err
		}
		whole[i] = size
		delta[i] = noCoding
		if i == 0 || v.TensorBytes == 0 || files[i-1].TensorBytes == 0 {
			continue
		}
		if delta[i], err = s.codingSize(v, files[i-1].ID, rep); err != nil {
			return row, err
		}
	}
	depths, planned := planChain(whole, delta, o.MaxDepth)
	row.Planned = planned
	for _, d := range depths {
		row.WorstDecodesPlanned = max(row.WorstDecodesPlanned, d+1)
		if d == 0 {
			row.Baselines++
		}
	}
	if worstBefore <= o.MaxDepth && planned >= fam.stored {
		row.Kept = true
		return row, nil
	}
	if o.DryRun {
		return row, nil
	}
	for i, v := range files {
		var want meta.VersionID
		if depths[i] > 0 {
			want = files[i-1].ID
		}
		if v.Ref == want {
			continue
		}
		rc, err := s.recode(v.ID, want, recodeOptions{})
		if err != nil {
			return row, err
		}
		if err := s.update(func(tx *txn) error { return tx.swapCoding(rc) }); err != nil {
			s.dropRecoded(rc)
			return row, fmt.Errorf("repack %s: %w", v.Path, err)
		}
		row.Recoded++
		rep.Recoded++
		rep.PackPagesWritten += rc.v.PackPages()
		logrus.Debugf("repack: version %d (%s) re-coded against %d: %d -> %d bytes", v.ID, v.Path, want, rc.old.PackBytes, rc.v.PackBytes)
		if o.afterSwap != nil {
			if err := o.afterSwap(rep.Recoded); err != nil {
				return row, err
			}
		}
	}
	return row, nil
}

// codingSize is the encoded size of version v coded against ref (0: whole):
// its pack size when it is coded so now, else measured. A delta that codes
// no chunk against ref costs noCoding (it is a baseline, counted as one).
func (s *Store) codingSize(v meta.Version, ref meta.VersionID, rep *RepackReport) (int64, error) {
	if v.Ref == ref {
		return v.PackBytes, nil
	}
	rc, err := s.recode(v.ID, ref, recodeOptions{measureOnly: true})
	if err != nil {
		return 0, fmt.Errorf("repack: measure %s: %w", v.Path, err)
	}
	rep.Measured++
	if ref != 0 && rc.v.Ref == 0 {
		return noCoding, nil
	}
	return rc.v.PackBytes, nil
}

// planChain chooses each file's depth (0: stored whole, d: a delta against
// the file before it, which has depth d-1) to minimise the total of whole
// and delta sizes with no depth above maxDepth: a dynamic programme over
// (file, depth), O(files × maxDepth). It returns the depths and the total.
func planChain(whole, delta []int64, maxDepth int) ([]int, int64) {
	n := len(whole)
	if n == 0 {
		return nil, 0
	}
	k := maxDepth + 1
	cost := make([][]int64, n)
	from := make([][]int, n) // for depth 0, the depth of the file before
	for i := range cost {
		cost[i] = make([]int64, k)
		from[i] = make([]int, k)
		for d := range cost[i] {
			cost[i][d] = noCoding
		}
	}
	cost[0][0] = whole[0]
	for i := 1; i < n; i++ {
		best, arg := int64(noCoding), 0
		for d := 0; d < k; d++ {
			if cost[i-1][d] < best {
				best, arg = cost[i-1][d], d
			}
		}
		cost[i][0], from[i][0] = best+whole[i], arg
		for d := 1; d < k; d++ {
			if cost[i-1][d-1] < noCoding && delta[i] < noCoding {
				cost[i][d] = cost[i-1][d-1] + delta[i]
			}
		}
	}
	end := 0
	for d := 1; d < k; d++ {
		if cost[n-1][d] < cost[n-1][end] {
			end = d
		}
	}
	total := cost[n-1][end]
	depths := make([]int, n)
	for i, d := n-1, end; i >= 0; i-- {
		depths[i] = d
		if d == 0 {
			if i > 0 {
				d = from[i][0]
			}
		} else {
			d--
		}
	}
	return depths, total
}

package chain

import (
	"sort"

	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// Summary and Contents are the store's part of what `ckptfs stats`,
// `replay` and .ckptfs/stats.json show (storedir.Report puts the media's
// figures between them). The top-level keys are the metric names of
// docs/ARCHITECTURE.md.
type Summary struct {
	Store   string `json:"store,omitempty"` // the store directory, when known
	Codec   string `json:"codec"`
	Scheme  string `json:"scheme"`
	SnapDis string `json:"snap_dis"`

	// LogicalBytes: bytes of every version committed (what applications
	// wrote, counted once per save). StoredBytes: encoded bytes kept now.
	LogicalBytes int64 `json:"logical_bytes"`
	StoredBytes  int64 `json:"stored_bytes"`
	LiveBytes    int64 `json:"live_bytes"` // logical size of the files there now
	Files        int   `json:"file_count"`
	// StreamedFiles and FallbackFiles count the versions ever committed by
	// how they were ingested: streamed, or through the fallback (drafts
	// re-read and encoded at commit). Every save streams now, so
	// FallbackFiles counts only saves made by releases that had the
	// fallback; it is 0 for a store made since (the key is kept).
	StreamedFiles int64 `json:"streamed_files"`
	FallbackFiles int64 `json:"fallback_files"`
	Versions      int   `json:"versions_kept"` // live plus hidden bases
	// LossyFiles counts the files an archive tier made lossy (`ckptfs
	// repack --lossy`); 0 unless a user asked for one.
	LossyFiles int `json:"lossy_files"`

	// WrittenVolumeRatio: device host pages written or still dirty in the
	// page cache ÷ the same of the shadow (docs/NANDSIM.md). EraseRatio:
	// device erases ÷ shadow erases (null until the shadow erased anything).
	WrittenVolumeRatio float64  `json:"written_volume_ratio"`
	EraseRatio         *float64 `json:"erase_ratio"`
	// UsefulStoragePages: device pages needed to rebuild the live files
	// (the paper's Table 9).
	UsefulStoragePages int64 `json:"useful_storage_pages"`
	// Metadata page writes are estimates (bbolt's dirty pages per commit;
	// one page per change for the plain filesystem), labelled as such.
	MetadataPagesEstimate       int64 `json:"metadata_pages_estimate"`
	ShadowMetadataPagesEstimate int64 `json:"shadow_metadata_pages_estimate"`
	// StagedPages: pages of staging files the host would have written back
	// (fsync, dirty expiry or limit) before their encoding; on the device.
	StagedPages int64 `json:"staged_pages"`
	// ShadowDirtyPages and ShadowSparedPages: in a mount, the shadow's
	// data pages committed and still in the modelled page cache, and
	// those it never wrote because they were dirtied again or freed
	// first (wear.DeferWriteBack). Shadow host pages written, dirty and
	// spared add up to what charging every commit writes (replay).
	ShadowDirtyPages  int64 `json:"shadow_dirty_pages"`
	ShadowSparedPages int64 `json:"shadow_spared_pages"`
	// WrittenVolumeRatioEveryCommit: the device's written, dirty and spared
	// pages ÷ the shadow's, as if both wrote every commit (replay's figure;
	// saves minutes apart come to it).
	WrittenVolumeRatioEveryCommit float64 `json:"written_volume_ratio_every_commit"`
	// SaveMode is how a mount's saves reach their staging files:
	// "passthrough" or "daemon-written" (empty offline).
	SaveMode string `json:"save_mode,omitempty"`
	// SavesWaitingForRoom counts a mount's saves kept in their staging
	// files because their commits found no room on the host filesystem.
	SavesWaitingForRoom int64 `json:"saves_waiting_for_room,omitempty"`
	// SavesRetrying counts a mount's saves kept in their staging files
	// after their commits failed otherwise, to be tried again;
	// CommitsFailed the failed commits of closed files since the mount.
	SavesRetrying int64 `json:"saves_retrying,omitempty"`
	CommitsFailed int64 `json:"commits_failed,omitempty"`
	// ReadCopies counts a mount's read copies since it started, and
	// ReadCopyBytes their bytes: committed files rebuilt into the host's
	// page cache at a reader's open, to be read through passthrough.
	ReadCopies    int64 `json:"read_copies,omitempty"`
	ReadCopyBytes int64 `json:"read_copy_bytes,omitempty"`
}

// Contents lists the store's series and files, and what reads cost.
type Contents struct {
	FamilyRows []FamilyRow `json:"families"`
	FileRows   []FileRow   `json:"files"`

	// ChunksRebuilt counts the chunks this process decoded from the device
	// (through their delta chains) since the store was opened: for reads,
	// and for the references of saves whose reference was not in the tier.
	// TierHits counts the chunks served from the reference tier instead.
	ChunksRebuilt int64 `json:"chunks_rebuilt"`
	TierHits      int64 `json:"reference_tier_hits"`

	// Runtime is the serving daemon's CPU and its collector's share
	// (absent when the report does not come from a daemon).
	Runtime *Runtime `json:"runtime,omitempty"`
}

// FamilyRow summarises one checkpoint series.
type FamilyRow struct {
	Name          string `json:"name"`
	Versions      uint64 `json:"versions_committed"`
	Kept          int    `json:"versions_kept"`
	LogicalBytes  int64  `json:"logical_bytes"` // of the versions kept
	StoredBytes   int64  `json:"stored_bytes"`
	SinceBaseline uint32 `json:"since_baseline"`
}

// FileRow describes one live file.
type FileRow struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	StoredBytes int64  `json:"stored_bytes"`
	Version     uint64 `json:"version"`
	Reference   uint64 `json:"reference"`
	Depth       uint32 `json:"chain_depth"`
	Codec       string `json:"codec"`
	Format      string `json:"format"`
	Family      string `json:"family"`
	Ingest      string `json:"ingest"`     // "stream" or "fallback"
	RefReason   string `json:"ref_reason"` // "same-file", "family", "layout"; "" for a baseline
	RefPath     string `json:"ref_path"`   // the path the reference was saved under
	Fidelity    string `json:"fidelity"`   // "exact", or the lossy scheme of an archive tier
}

// Figures gathers the store's part of its report. The ratios of written
// volume and erases come from the media (storedir.Report), the wear
// accounts' figures from here.
func (s *Store) Figures() (*Summary, *Contents, error) {
	p := s.Policy()
	r := &Summary{Codec: p.Codec.String(), Scheme: p.Scheme.String(), SnapDis: policy.FormatSnapDis(p.SnapDis)}
	c := &Contents{ChunksRebuilt: s.rebuilt.Load(), TierHits: s.refs.Hits()}
	families := map[string]*FamilyRow{}
	err := s.view(func(tx *txn) error {
		r.LogicalBytes = int64(tx.mtx.Counter("logical_bytes"))
		r.StreamedFiles = int64(tx.mtx.Counter("streamed_versions"))
		r.FallbackFiles = int64(tx.mtx.Counter("fallback_versions"))
		refPaths := map[meta.VersionID]string{}
		paths, err := namespace.Paths(tx.mtx)
		if err != nil {
			return err
		}
		err = tx.mtx.ForEachVersion(func(v *meta.Version) error {
			r.Versions++
			r.StoredBytes += v.PackBytes
			r.UsefulStoragePages += v.PackPages()
			f := families[v.Family]
			if f == nil {
				f = &FamilyRow{Name: v.Family}
				families[v.Family] = f
			}
			refPaths[v.ID] = v.Path
			f.Kept++
			f.LogicalBytes += v.Size
			f.StoredBytes += v.PackBytes
			if v.Live {
				r.Files++
				r.LiveBytes += v.Size
				c.FileRows = append(c.FileRows, FileRow{Path: paths[v.Ino], Size: v.Size, StoredBytes: v.PackBytes,
					Version: uint64(v.ID), Reference: uint64(v.Ref), Depth: v.Depth, Codec: v.Codec, Format: v.Format, Family: v.Family,
					Ingest: IngestMode(v), RefReason: v.RefReason, Fidelity: FidelityOf(v)})
				if v.Fidelity != "" {
					r.LossyFiles++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range c.FileRows {
			if ref := meta.VersionID(c.FileRows[i].Reference); ref != 0 {
				c.FileRows[i].RefPath = refPaths[ref]
			}
		}
		return tx.mtx.ForEachFamily(func(f *meta.Family) error {
			if row := families[f.Name]; row != nil {
				row.Versions, row.SinceBaseline = f.Versions, f.SinceBaseline
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	for _, f := range families {
		c.FamilyRows = append(c.FamilyRows, *f)
	}
	sort.Slice(c.FamilyRows, func(i, j int) bool { return c.FamilyRows[i].Name < c.FamilyRows[j].Name })
	sort.Slice(c.FileRows, func(i, j int) bool { return c.FileRows[i].Path < c.FileRows[j].Path })
	if s.wear != nil {
		r.MetadataPagesEstimate = s.wear.MetadataPages()
		r.ShadowMetadataPagesEstimate = s.wear.ShadowMetadataPages()
		r.StagedPages = s.wear.StagedPages()
		r.ShadowDirtyPages, r.ShadowSparedPages = s.wear.DirtyPages(), s.wear.SparedPages()
	}
	return r, c, nil
}

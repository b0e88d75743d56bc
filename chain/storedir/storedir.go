// Package storedir assembles a store kept in a directory: the media
// (package medium: metadata, the simulated SSD and its shadow, the chunk
// backend, the staging files) and the store's logic (package chain) on
// top of them. A mount, the offline commands and replay all open stores
// here, so they run the same assembly.
package storedir

import (
	"fmt"
	"math"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// Options configure Open.
type Options struct {
	chain.Options
	// Media configures the directory's device, backend and metadata.
	Media medium.Options
	// StoredPolicy uses the policy the store was last opened with, if any,
	// instead of Options.Policy (readers such as stats and fsck, and mounts,
	// which then apply the coding flags given over it: OverridePolicy).
	StoredPolicy bool
}

// Dir is a store kept in a directory, open: the store and its media (the
// metadata database, the simulated devices, the staging files).
type Dir struct {
	*chain.Store
	*medium.Medium
	// spared is what the page caches spared in earlier mounts of the store
	// (the device's and the shadow's), kept across them: the page caches'
	// models live in memory.
	spared struct{ device, shadow int64 }
}

// Counters of the pages the page caches spared in earlier mounts.
const (
	deviceSparedCounter = "device_spared_pages"
	shadowSparedCounter = "shadow_spared_pages"
)

// Open opens the store in dir, creating it (mode 0700) if needed. A store
// held by another process is refused with an error wrapping meta.ErrLocked.
// Saves closed before a daemon died, still in their staging files, become
// the files' content before Open returns.
func Open(dir string, o Options) (*Dir, error) {
	m, err := medium.Open(dir, o.Media)
	if err != nil {
		return nil, err
	}
	s, err := chain.Open(chain.Media{DB: m.DB, Data: m.Data, Accounts: m.Accounts, Staging: m.Staging},
		o.Options, o.StoredPolicy)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	ds := &Dir{Store: s, Medium: m}
	_ = m.DB.View(func(tx *meta.Tx) error {
		ds.spared.device, ds.spared.shadow = int64(tx.Counter(deviceSparedCounter)), int64(tx.Counter(shadowSparedCounter))
		return nil
	})
	return ds, nil
}

// Sync makes everything durable: encoded chunks, the simulators' state
// (their statistics) and metadata.
func (ds *Dir) Sync() error { return ds.Medium.Sync() }

// Close stops the store and closes its media.
func (ds *Dir) Close() error {
	ds.Store.Close()
	err := ds.saveSpared()
	if cerr := ds.Medium.Close(); err == nil {
		err = cerr
	}
	return err
}

// saveSpared records what the page caches spared, this mount's included,
// for the reports of later opens (a killed daemon loses its mount's
// share: statistics only).
func (ds *Dir) saveSpared() error {
	dev, shadow := ds.Dev.SparedPages(), ds.Accounts.SparedPages()
	if dev == 0 && shadow == 0 {
		return nil
	}
	err := ds.Medium.DB.Update(func(tx *meta.Tx) error {
		if err := tx.SetCounter(deviceSparedCounter, uint64(ds.spared.device+dev)); err != nil {
			return err
		}
		return tx.SetCounter(shadowSparedCounter, uint64(ds.spared.shadow+shadow))
	})
	if err != nil {
		return fmt.Errorf("record the pages the page caches spared: %w", err)
	}
	return nil
}

// Report is what `ckptfs stats`, `replay` and .ckptfs/stats.json show: the
// store's summary, the two simulated SSDs and the wear they project, and the
// store's contents. The top-level keys are the metric names of
// docs/ARCHITECTURE.md.
type Report struct {
	chain.Summary
	// DeviceDirtyPages and DeviceSparedPages: in a mount, the chunk pages
	// written into the host's page cache and not yet programmed, and those
	// it never programmed because they were trimmed (their version freed)
	// or written again first (nandsim.SSD.DeferPrograms). Device host pages
	// written, dirty and spared add up to what programming every write
	// costs (replay).
	DeviceDirtyPages  int64         `json:"device_dirty_pages"`
	DeviceSparedPages int64         `json:"device_spared_pages"`
	Device            nandsim.Stats `json:"device"`
	Shadow            nandsim.Stats `json:"shadow"`
	Lifetime          Lifetime      `json:"lifetime"`
	Capacity          Capacity      `json:"capacity"`
	chain.Contents
}

// Capacity is the store's room: what df shows, the simulated flash behind
// it (over-provisioning and the metadata region included) and where the
// device's size came from.
type Capacity struct {
	UsableBytes int64  `json:"usable_bytes"` // the data area: df's size
	FreeBytes   int64  `json:"free_bytes"`
	FlashBytes  int64  `json:"flash_bytes"`
	Source      string `json:"source"`
}

// Lifetime projects device wear from the erases observed over Window.
type Lifetime struct {
	PELimit    int64   `json:"pe_limit"`
	WindowDays float64 `json:"window_days"`
	// Days until the device wears out at the observed erase rate; 0 when
	// nothing was erased yet (no rate to project).
	DeviceDays float64 `json:"device_days"`
	ShadowDays float64 `json:"shadow_days"`
}

// ReportOptions configure Report.
type ReportOptions struct {
	PELimit int64         // P/E cycles per block (default 3000, a common MLC rating)
	Window  time.Duration // time over which the erases happened (default: since the store was made)
}

// Report gathers the store's figures.
func (ds *Dir) Report(o ReportOptions) (*Report, error) {
	// Logged metadata changes are committed first, so that the report
	// counts the pages their synced commit writes.
	if err := ds.Medium.DB.Flush(); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r := &Report{Device: ds.Dev.Stats(), Shadow: ds.Shadow.Stats(),
		DeviceDirtyPages: ds.Dev.DirtyPages(), DeviceSparedPages: ds.spared.device + ds.Dev.SparedPages()}
	sum, contents, err := ds.Figures()
	if err != nil {
		return nil, err
	}
	r.Summary, r.Contents = *sum, *contents
	r.ShadowSparedPages += ds.spared.shadow
	// On both sides the pages still dirty will be written unless freed
	// within the expiry, so they count as written.
	if sh := r.Shadow.HostPagesWritten + r.ShadowDirtyPages; sh > 0 {
		r.WrittenVolumeRatio = float64(r.Device.HostPagesWritten+r.DeviceDirtyPages) / float64(sh)
	}
	if sh := r.Shadow.HostPagesWritten + r.ShadowDirtyPages + r.ShadowSparedPages; sh > 0 {
		r.WrittenVolumeRatioEveryCommit = float64(r.Device.HostPagesWritten+r.DeviceDirtyPages+r.DeviceSparedPages) / float64(sh)
	}
	if r.Shadow.Erases > 0 {
		er := float64(r.Device.Erases) / float64(r.Shadow.Erases)
		r.EraseRatio = &er
	}
	r.Lifetime = ds.lifetime(o)
	st := ds.Store.Statfs()
	cfg := ds.Dev.Config()
	r.Capacity = Capacity{UsableBytes: st.Pages * int64(st.PageSize), FreeBytes: st.FreePages * int64(st.PageSize),
		FlashBytes: cfg.PhysicalPages() * int64(cfg.PageSize), Source: ds.DeviceSource}
	return r, nil
}

func (ds *Dir) lifetime(o ReportOptions) Lifetime {
	l := Lifetime{PELimit: o.PELimit}
	if l.PELimit <= 0 {
		l.PELimit = 3000
	}
	window := o.Window
	if window <= 0 {
		window = ds.Age()
	}
	l.WindowDays = window.Hours() / 24
	if window > 0 {
		l.DeviceDays, _ = ds.Dev.ProjectedLifetime(l.PELimit, ds.Dev.Stats().Erases, window)
		l.ShadowDays, _ = ds.Shadow.ProjectedLifetime(l.PELimit, ds.Shadow.Stats().Erases, window)
	}
	// Without erases there is no rate to project from.
	for _, d := range []*float64{&l.DeviceDays, &l.ShadowDays} {
		if math.IsInf(*d, 0) || math.IsNaN(*d) {
			*d = 0
		}
	}
	return l
}

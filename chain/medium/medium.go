// Package medium opens what a store directory keeps besides the store's
// logic: its metadata database, the simulated SSD and its shadow, the
// backend that keeps encoded chunks, the wear accounts and the staging
// directory. It names the directory's files, and it is the one place that
// chooses a backend: package chain sees only storage.Backend and
// wear.Accounts, and package storedir puts the two together.
package medium

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/memstore"
	"github.com/ckptfs/ckptfs/chain/storage/pagestore"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
	"github.com/sirupsen/logrus"
)

// Files of a store directory. docs/STORE.md describes them.
const (
	MetaFile        = "meta.db"
	JournalFile     = "meta.journal" // logged metadata changes not yet in meta.db
	DeviceFile      = "device.img"
	DeviceStateFile = "device.state"
	ShadowStateFile = "shadow.state"
	LogFile         = "ckptfs.log" // the daemon's log
	StagingDir      = staging.Name
)

// Files lists the plain files a store directory may hold.
var Files = []string{MetaFile, JournalFile, DeviceFile, DeviceStateFile, ShadowStateFile, LogFile}

// A backend keeps a store's encoded chunks. It is given the store's
// simulated device and the first page of that device's data area (the
// pages before it are the metadata region).
type backend func(db *meta.DB, dev *nandsim.SSD, dataStart int64) (storage.Backend, error)

// backends are the media a store can keep its chunks on, by the name the
// store's configuration records. A new backend is a package implementing
// storage.Backend and its line here.
var backends = map[string]backend{
	// The page store on the simulated NAND SSD (device.img): every page
	// written is programmed and counted.
	SSD: func(db *meta.DB, dev *nandsim.SSD, dataStart int64) (storage.Backend, error) {
		return pagestore.Open(db, dev, dataStart, dev.LogicalPages()-dataStart)
	},
	// Chunks in memory, gone when the process ends: for tests and
	// throw-away stores. Nothing is charged to the device but metadata.
	Memory: func(_ *meta.DB, dev *nandsim.SSD, dataStart int64) (storage.Backend, error) {
		return memstore.New(dev.PageSize(), dev.LogicalPages()-dataStart), nil
	},
}

// Backend names.
const (
	SSD    = "ssd"
	Memory = "memory"
)

// Options configure Open.
type Options struct {
	// Device is the simulated SSD of a new store (zero: StoreDevice). An
	// existing store keeps its geometry.
	Device nandsim.Config
	// DeviceSource says where a new store's device size came from (the
	// flag, the host filesystem); the store records it for its report.
	DeviceSource string
	// Backend keeps a new store's chunks (empty: SSD). An existing store
	// keeps the one it recorded; asking for another is an error.
	Backend string
	// Precondition warms a new store's device and shadow up to the paper's
	// Table 8 split, so that GC runs from the first write.
	Precondition bool
	// NoSync skips fsync of the metadata (throw-away stores: replay, tests).
	NoSync bool
	// MemoryDevice keeps the device content in memory instead of a file.
	MemoryDevice bool
}

// Medium is a store directory's media, open.
type Medium struct {
	Dir    string
	DB     *meta.DB
	Dev    *nandsim.SSD
	Shadow *nandsim.SSD
	// MetaPages is the device region [0, MetaPages) that metadata writes
	// are accounted to; encoded chunks live in the pages after it.
	MetaPages int64
	// Data keeps the encoded chunks; Accounts charges the rest of the
	// wear (metadata, the plain filesystem of the shadow).
	Data     storage.Backend
	Accounts *wear.Accounts
	// BackendName is the backend Data is (SSD, Memory).
	BackendName string
	// Staging holds the files being saved into a mount (chain/staging).
	Staging *staging.Dir
	// IsNew: the store was created by this Open.
	IsNew bool
	// DeviceSource says where the device's size came from.
	DeviceSource string
}

// metaRegion is the size of the device region metadata writes are accounted
// to (the estimate of bbolt's page writes): 1/256 of the device, at least
// 64 pages.
func metaRegion(dev *nandsim.SSD) (int64, error) {
	pages := max(64, dev.LogicalPages()/256)
	if pages >= dev.LogicalPages() {
		return 0, fmt.Errorf("device of %d pages too small for a %d-page metadata region", dev.LogicalPages(), pages)
	}
	return pages, nil
}

// Open opens the media of the store in dir, creating it (mode 0700) if
// needed. A store held by another process is refused with an error wrapping
// meta.ErrLocked.
func Open(dir string, o Options) (*Medium, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	db, err := meta.Open(filepath.Join(dir, MetaFile), meta.Options{NoSync: o.NoSync, Journal: filepath.Join(dir, JournalFile)})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	m := &Medium{Dir: dir, DB: db}
	fail := func(err error) (*Medium, error) {
		m.closeDevices()
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	cfg, isNew, err := deviceConfig(db, o.Device, o.DeviceSource)
	if err != nil {
		return fail(err)
	}
	m.IsNew = isNew
	m.DeviceSource = deviceSource(db, cfg)
	if m.BackendName, err = backendName(db, o.Backend, isNew); err != nil {
		return fail(err)
	}
	devBacking := nandsim.FileBacking(filepath.Join(dir, DeviceFile))
	if o.MemoryDevice {
		devBacking = nandsim.MemoryBacking()
	}
	if m.Dev, err = nandsim.Open(cfg, nandsim.Options{Backing: devBacking, StatePath: filepath.Join(dir, DeviceStateFile)}); err != nil {
		return fail(fmt.Errorf("device: %w", err))
	}
	if m.Shadow, err = nandsim.Open(cfg, nandsim.Options{Backing: nandsim.NoBacking(), StatePath: filepath.Join(dir, ShadowStateFile)}); err != nil {
		return fail(fmt.Errorf("shadow device: %w", err))
	}
	if !isNew && (!m.Dev.StateRestored() || !m.Shadow.StateRestored()) {
		logrus.Warnf("store %s: device statistics restart (%s; %s): data is intact", dir, m.Dev.StateReason(), m.Shadow.StateReason())
	}
	if isNew && o.Precondition {
		for _, d := range []*nandsim.SSD{m.Dev, m.Shadow} {
			if err := d.Precondition(nandsim.PaperPrecondition()); err != nil {
				return fail(fmt.Errorf("precondition: %w", err))
			}
		}
	}
	if m.MetaPages, err = metaRegion(m.Dev); err != nil {
		return fail(err)
	}
	if m.Data, err = backends[m.BackendName](db, m.Dev, m.MetaPages); err != nil {
		return fail(err)
	}
	if m.Accounts, err = wear.New(db, m.Dev, m.Shadow, m.MetaPages); err != nil {
		return fail(err)
	}
	if m.Staging, err = staging.OpenDir(filepath.Join(dir, StagingDir)); err != nil {
		return fail(err)
	}
	return m, nil
}

// backendName returns the store's backend, recording want (or SSD) for a
// store that has no record: a new one, or one made before backends were
// recorded, which is on the SSD.
func backendName(db *meta.DB, want string, isNew bool) (string, error) {
	var recorded []byte
	if err := db.View(func(tx *meta.Tx) error { recorded = tx.Config("backend"); return nil }); err != nil {
		return "", err
	}
	name := string(recorded)
	switch {
	case recorded != nil:
	case isNew && want != "":
		name = want
	default:
		name = SSD
	}
	if _, ok := backends[name]; !ok {
		return "", fmt.Errorf("unknown backend %q", name)
	}
	if want != "" && want != name {
		return "", fmt.Errorf("the store keeps its chunks on backend %q, not %q", name, want)
	}
	if name == Memory && !isNew {
		return "", fmt.Errorf("the store kept its chunks in memory (backend %q): they ended with the process that made it", Memory)
	}
	if recorded != nil {
		return name, nil
	}
	return name, db.Update(func(tx *meta.Tx) error { return tx.SetConfig("backend", []byte(name)) })
}

// StoreDevice is the simulated SSD of a new store: the paper's Table 4
// device, whose GC, once free blocks fall under the 5% reserve, cleans just
// past it (as DiskSim's threshold GC does) rather than up to a higher mark,
// so that erases follow the workload instead of coming in bursts of
// hundreds of blocks that small workloads would either all see or miss.
func StoreDevice() nandsim.Config {
	cfg := nandsim.DefaultConfig()
	cfg.GCHighWater = cfg.GCReserve
	return cfg
}

// deviceConfig returns the store's device geometry, recording want (or the
// default) and where its size came from for a new store.
func deviceConfig(db *meta.DB, want nandsim.Config, source string) (cfg nandsim.Config, isNew bool, err error) {
	err = db.Update(func(tx *meta.Tx) error {
		if b := tx.Config("device"); b != nil {
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("device config: %w", err)
			}
			return cfg.Validate()
		}
		isNew = true
		cfg = want
		if cfg.Channels == 0 {
			cfg, source = StoreDevice(), ""
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		if source == "" && cfg == StoreDevice() {
			source = PaperDeviceSource
		}
		if source != "" {
			if err := tx.SetConfig("device-source", []byte(source)); err != nil {
				return err
			}
		}
		b, _ := json.Marshal(cfg)
		return tx.SetConfig("device", b)
	})
	return cfg, isNew, err
}

// PaperDeviceSource is the recorded source of a store on the paper's device.
const PaperDeviceSource = "the paper's Table 4 device (32 GiB of flash)"

// deviceSource is where the store's device size came from, as recorded
// when it was made; stores made before the source was recorded had the
// paper's device unless --device-size said otherwise.
func deviceSource(db *meta.DB, cfg nandsim.Config) string {
	var source string
	db.View(func(tx *meta.Tx) error {
		source = string(tx.Config("device-source"))
		return nil
	})
	switch {
	case source != "":
		return source
	case cfg == StoreDevice():
		return PaperDeviceSource
	default:
		return "--device-size (made before ckptfs recorded a device's source)"
	}
}

func (m *Medium) closeDevices() error {
	var errs []error
	if m.Dev != nil {
		errs = append(errs, m.Dev.Close())
	}
	if m.Shadow != nil {
		errs = append(errs, m.Shadow.Close())
	}
	return errors.Join(errs...)
}

// MemoryNeeded estimates the memory the two simulated SSDs hold, for
// sizing the heap limit.
func (m *Medium) MemoryNeeded() int64 { return m.Dev.MemoryBytes() + m.Shadow.MemoryBytes() }

// Sync makes everything durable: the device (encoded chunks), the
// simulators' state (their statistics) and metadata.
func (m *Medium) Sync() error {
	if err := m.Dev.Sync(); err != nil {
		return fmt.Errorf("sync device: %w", err)
	}
	if err := m.Shadow.Sync(); err != nil {
		return fmt.Errorf("sync shadow device: %w", err)
	}
	return m.DB.Sync()
}

// Close seals the metadata (no change commits uncounted), saves the device
// state and closes everything. The store using the media closes first.
func (m *Medium) Close() error {
	m.DB.Seal()
	err := m.closeDevices()
	if cerr := m.DB.Close(); err == nil {
		err = cerr
	}
	return err
}

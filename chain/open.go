package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/chain/storage/pagestore"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
	"github.com/sirupsen/logrus"
)

// Files of a store directory. docs/STORE.md describes them.
const (
	MetaFile        = "meta.db"
	DeviceFile      = "device.img"
	DeviceStateFile = "device.state"
	ShadowStateFile = "shadow.state"
)

// DirOptions configure OpenDir.
type DirOptions struct {
	Options
	// Device is the simulated SSD of a new store (zero: the paper's Table
	// 4 device). An existing store keeps its geometry.
	Device nandsim.Config
	// Precondition warms a new store's device and shadow up to the paper's
	// Table 8 split, so that GC runs from the first write.
	Precondition bool
	// NoSync skips fsync of the metadata (throw-away stores: replay, tests).
	NoSync bool
	// MemoryDevice keeps the device content in memory instead of a file.
	MemoryDevice bool
	// StoredPolicy uses the policy the store was last opened with, if any,
	// instead of Options.Policy (readers such as stats and fsck, and mounts
	// without coding flags).
	StoredPolicy bool
}

// DirStore is a store kept in a directory: its metadata database, the
// simulated SSD that keeps encoded chunks (a page store on its data area),
// and the shadow SSD of the wear accounts.
type DirStore struct {
	*Store
	Dir    string
	DB     *meta.DB
	Dev    *nandsim.SSD
	Shadow *nandsim.SSD
	// MetaPages is the device region [0, MetaPages) that metadata writes
	// are accounted to; encoded chunks live in the pages after it.
	MetaPages int64
	// Staging holds the files being saved into a mount (chain/staging).
	Staging *staging.Dir
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

// OpenDir opens the store in dir, creating it (mode 0700) if needed. A store
// held by another process is refused with an error wrapping meta.ErrLocked.
func OpenDir(dir string, o DirOptions) (*DirStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	db, err := meta.Open(filepath.Join(dir, MetaFile), meta.Options{NoSync: o.NoSync})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	ds := &DirStore{Dir: dir, DB: db}
	fail := func(err error) (*DirStore, error) {
		ds.closeDevices()
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	cfg, isNew, err := deviceConfig(db, o.Device)
	if err != nil {
		return fail(err)
	}
	backing := nandsim.FileBacking(filepath.Join(dir, DeviceFile))
	if o.MemoryDevice {
		backing = nandsim.MemoryBacking()
	}
	if ds.Dev, err = nandsim.Open(cfg, nandsim.Options{Backing: backing, StatePath: filepath.Join(dir, DeviceStateFile)}); err != nil {
		return fail(fmt.Errorf("device: %w", err))
	}
	if ds.Shadow, err = nandsim.Open(cfg, nandsim.Options{Backing: nandsim.NoBacking(), StatePath: filepath.Join(dir, ShadowStateFile)}); err != nil {
		return fail(fmt.Errorf("shadow device: %w", err))
	}
	if !isNew && (!ds.Dev.StateRestored() || !ds.Shadow.StateRestored()) {
		logrus.Warnf("store %s: device statistics restart (%s; %s): data is intact", dir, ds.Dev.StateReason(), ds.Shadow.StateReason())
	}
	if isNew && o.Precondition {
		for _, d := range []*nandsim.SSD{ds.Dev, ds.Shadow} {
			if err := d.Precondition(nandsim.PaperPrecondition()); err != nil {
				return fail(fmt.Errorf("precondition: %w", err))
			}
		}
	}
	if o.Policy, err = storedPolicy(db, o.Policy, o.StoredPolicy); err != nil {
		return fail(err)
	}
	if ds.MetaPages, err = metaRegion(ds.Dev); err != nil {
		return fail(err)
	}
	data, err := pagestore.Open(db, ds.Dev, ds.MetaPages, ds.Dev.LogicalPages()-ds.MetaPages)
	if err != nil {
		return fail(err)
	}
	accounts, err := wear.New(db, ds.Dev, ds.Shadow, ds.MetaPages)
	if err != nil {
		return fail(err)
	}
	if ds.Store, err = NewStore(db, data, accounts, o.Options); err != nil {
		return fail(err)
	}
	// Saves closed before a daemon died are still in their staging files:
	// they become the files' content before anything reads the store.
	if ds.Staging, err = staging.OpenDir(filepath.Join(dir, staging.Name)); err != nil {
		ds.Store.Close()
		return fail(err)
	}
	if n, err := ds.Store.RecoverStaged(ds.Staging); err != nil {
		ds.Store.Close()
		return fail(err)
	} else if n > 0 {
		logrus.Warnf("store %s: recovered %d saves closed before the daemon stopped", dir, n)
	}
	return ds, nil
}

// policyRecord is how a policy is kept in the store's configuration.
type policyRecord struct {
	Codec    string `json:"codec"`
	Scheme   string `json:"scheme"`
	SnapDis  string `json:"snap_dis"`
	MaxDepth int    `json:"max_depth"`
}

// storedPolicy returns the policy to use and records it: the stored one
// if useStored and there is one, else p.
func storedPolicy(db *meta.DB, p policy.Policy, useStored bool) (policy.Policy, error) {
	err := db.Update(func(tx *meta.Tx) error {
		if b := tx.Config("policy"); useStored && b != nil {
			var rec policyRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				return fmt.Errorf("stored policy: %w", err)
			}
			var err error
			if p.Codec, err = encode.ParseCodec(rec.Codec); err != nil {
				return err
			}
			if p.Scheme, err = policy.ParseScheme(rec.Scheme); err != nil {
				return err
			}
			if p.SnapDis, err = policy.ParseSnapDis(rec.SnapDis); err != nil {
				return err
			}
			p.MaxDepth = rec.MaxDepth
			return nil
		}
		b, _ := json.Marshal(policyRecord{Codec: p.Codec.String(), Scheme: p.Scheme.String(),
			SnapDis: policy.FormatSnapDis(p.SnapDis), MaxDepth: p.MaxDepth})
		return tx.SetConfig("policy", b)
	})
	return p, err
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
// default) for a new store.
func deviceConfig(db *meta.DB, want nandsim.Config) (cfg nandsim.Config, isNew bool, err error) {
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
			cfg = StoreDevice()
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		b, _ := json.Marshal(cfg)
		return tx.SetConfig("device", b)
	})
	return cfg, isNew, err
}

func (ds *DirStore) closeDevices() error {
	var errs []error
	if ds.Dev != nil {
		errs = append(errs, ds.Dev.Close())
	}
	if ds.Shadow != nil {
		errs = append(errs, ds.Shadow.Close())
	}
	return errors.Join(errs...)
}

// MemoryNeeded estimates the memory the two simulated SSDs hold (their FTL
// maps and per-block arrays), for sizing the heap limit.
func (ds *DirStore) MemoryNeeded() int64 {
	cfg := ds.Dev.Config()
	return 2 * 8 * int64(cfg.Channels*cfg.ChipsPerChannel*cfg.BlocksPerChip*cfg.PagesPerBlock)
}

// Sync makes everything durable: encoded chunks, the simulators' state
// (their statistics) and metadata.
func (ds *DirStore) Sync() error {
	if err := ds.Dev.Sync(); err != nil {
		return fmt.Errorf("sync device: %w", err)
	}
	if err := ds.Shadow.Sync(); err != nil {
		return fmt.Errorf("sync shadow device: %w", err)
	}
	return ds.DB.Sync()
}

// Close saves the device state and closes everything.
func (ds *DirStore) Close() error {
	if ds.Store != nil {
		ds.Store.Close()
	}
	ds.DB.Seal()
	err := ds.closeDevices()
	if cerr := ds.DB.Close(); err == nil {
		err = cerr
	}
	return err
}

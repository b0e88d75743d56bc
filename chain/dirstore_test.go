package chain

import (
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// The tests of this package open stores in directories as package storedir
// does (which imports chain, so these tests cannot): medium.Open, then
// Open on its media.

const (
	MetaFile        = medium.MetaFile
	DeviceFile      = medium.DeviceFile
	DeviceStateFile = medium.DeviceStateFile
)

type DirOptions struct {
	Options
	Device       nandsim.Config
	NoSync       bool
	StoredPolicy bool
}

type DirStore struct {
	*Store
	*medium.Medium
	DB *meta.DB // the tests change metadata behind the store's back
}

func OpenDir(dir string, o DirOptions) (*DirStore, error) {
	m, err := medium.Open(dir, medium.Options{Device: o.Device, NoSync: o.NoSync})
	if err != nil {
		return nil, err
	}
	s, err := Open(Media{DB: m.DB, Data: m.Data, Accounts: m.Accounts, Staging: m.Staging}, o.Options, o.StoredPolicy)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &DirStore{Store: s, Medium: m, DB: m.DB}, nil
}

func (ds *DirStore) Sync() error { return ds.Medium.Sync() }

func (ds *DirStore) Close() error {
	ds.Store.Close()
	return ds.Medium.Close()
}

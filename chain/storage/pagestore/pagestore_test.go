package pagestore

import (
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/storagetest"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

func TestBackend(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, db *meta.DB) storage.Backend {
		cfg := nandsim.DefaultConfig()
		cfg.Channels, cfg.ChipsPerChannel, cfg.BlocksPerChip = 1, 1, 64
		dev, err := nandsim.Open(cfg, nandsim.Options{Backing: nandsim.MemoryBacking()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		// Leave the first pages out, as the store leaves its metadata region.
		s, err := Open(db, dev, 64, min(dev.LogicalPages()-64, 4096))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

package memstore

import (
	"testing"

	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/storage/storagetest"
	"github.com/ckptfs/ckptfs/meta"
)

func TestBackend(t *testing.T) {
	storagetest.Run(t, func(*testing.T, *meta.DB) storage.Backend { return New(512, 256) })
}

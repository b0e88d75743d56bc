package chain

import (
	"path/filepath"

	"github.com/ckptfs/ckptfs/chain/staging"
	"github.com/ckptfs/ckptfs/chain/storage"
	"github.com/ckptfs/ckptfs/chain/wear"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/sirupsen/logrus"
)

// Media is what a store runs on. Package medium opens them for a store
// directory, choosing the backend; the store sees only these seams.
type Media struct {
	DB       *meta.DB
	Data     storage.Backend
	Accounts *wear.Accounts // nil: nothing accounted beyond the backend's medium
	Staging  *staging.Dir
}

// Open assembles a store on its media: the policy (the one stored in the
// store when useStored and there is one, else o.Policy, which is then
// recorded), the store, and the saves a dead daemon left closed in their
// staging files, ingested before anything reads the store. On error the
// caller closes the media.
func Open(m Media, o Options, useStored bool) (*Store, error) {
	var err error
	if o.Policy, err = StoredPolicy(m.DB, o.Policy, useStored); err != nil {
		return nil, err
	}
	s, err := NewStore(m.DB, m.Data, m.Accounts, o)
	if err != nil {
		return nil, err
	}
	n, err := s.RecoverStaged(m.Staging)
	if err != nil {
		s.Close()
		return nil, err
	}
	if n > 0 {
		logrus.Warnf("store %s: recovered %d saves closed before the daemon stopped", filepath.Dir(m.DB.Path()), n)
	}
	if w := len(s.waitingStaged); w > 0 {
		logrus.Warnf("store %s: %d saves closed before the daemon stopped wait in their staging files for their commits", filepath.Dir(m.DB.Path()), w)
	}
	return s, nil
}

package chain

import (
	"encoding/json"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// policyRecord is how a policy is kept in the store's configuration.
type policyRecord struct {
	Codec    string `json:"codec"`
	Scheme   string `json:"scheme"`
	SnapDis  string `json:"snap_dis"`
	MaxDepth int    `json:"max_depth"`
}

// StoredPolicy returns the policy to use and records it in the store: the
// stored one if useStored and there is one, else p.
func StoredPolicy(db *meta.DB, p policy.Policy, useStored bool) (policy.Policy, error) {
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


package chain

import (
	"fmt"
	"io"
	"strings"

	"github.com/ckptfs/ckptfs/encode/analyze"
	"github.com/ckptfs/ckptfs/meta"
)

// momentNames are the optimizer states an archive tier may code with its
// moments scheme (RepackOptions.LossyMoments): torch.optim's running
// averages of gradients and their squares. Steps, counts and the weights
// themselves are not among them.
var momentNames = map[string]bool{"exp_avg": true, "exp_avg_sq": true, "max_exp_avg_sq": true,
	"momentum_buffer": true, "square_avg": true, "exp_inf": true}

// maxRolePickle bounds the data.pkl read to tell tensors' roles: a state
// dict's pickle is kilobytes to a few megabytes.
const maxRolePickle = 64 << 20

// momentKeys returns the segment keys of version v's optimizer moments: a
// torch.save zip's storages whose dict-key path ends in one of
// momentNames, read from its data.pkl (members: its zip's stored members).
// Other formats, and a zip with no single readable data.pkl, have none.
func (s *Store) momentKeys(v meta.Version, members []zipMember) (map[string]bool, error) {
	if v.Format != "torch-zip" {
		return nil, nil
	}
	var pkl *zipMember
	for i, m := range members {
		if !m.torchPickle() {
			continue
		}
		if pkl != nil {
			return nil, nil // two archives' pickles: whose storage is data/0?
		}
		pkl = &members[i]
	}
	if pkl == nil || pkl.size > maxRolePickle {
		return nil, nil
	}
	r, err := s.OpenVersion(v.ID)
	if err != nil {
		return nil, err
	}
	p := make([]byte, pkl.size)
	if _, err := r.ReadAt(p, pkl.data); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s of %s: %w", pkl.name, v.Path, err)
	}
	keys := map[string]bool{}
	for key, name := range analyze.StorageNames(p) {
		if i := strings.LastIndexByte(name, '.'); momentNames[name[i+1:]] {
			keys[key] = true
		}
	}
	return keys, nil
}

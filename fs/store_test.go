package fs

import "github.com/ckptfs/ckptfs/chain"

// The store the command mounts is a Store.
var _ Store = (*chain.Store)(nil)

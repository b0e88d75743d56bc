package fs

import (
	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/namespace"
)

// The store the command mounts plays every role.
var (
	_ Store     = (*chain.Store)(nil)
	_ Namespace = (*namespace.Namespace)(nil)
)

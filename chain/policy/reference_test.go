package policy

import (
	"testing"

	"github.com/ckptfs/ckptfs/meta"
)

// Under the default policy a new version deltas against its reference only
// while a read of it decodes at most DefaultMaxDepth+1 chunks per chunk,
// however well deltas pay.
func TestDefaultBoundsReadCost(t *testing.T) {
	p := Default()
	for depth := 0; depth <= 6; depth++ {
		f := &meta.Family{SinceBaseline: uint32(depth), BaselineSize: 100, BaselineBytes: 80,
			LastSize: 100, LastBytes: 10, DeltaBytes: 10 * int64(depth)}
		ref := &meta.Version{Depth: uint32(depth)}
		decodes := depth + 2 // the new version's chain, itself included
		if got, want := p.Accept(f, ref), decodes <= DefaultMaxDepth+1; got != want {
			t.Errorf("reference at depth %d: accept %v, want %v (%d decodes per chunk)", depth, got, want, decodes)
		}
	}
}

package chain

import (
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// TestLayoutFindsRenamedSave: a save written under a random temporary name
// (and renamed only after its commit) is coded against the last save with
// the same tensor layout in the same tree; the rename then moves it into
// its final name's series.
func TestLayoutFindsRenamedSave(t *testing.T) {
	ds := openTestStore(t, "", policy.Policy{Codec: policy.Default().Codec, Scheme: policy.Progressive, SnapDis: 100, MaxDepth: 100})
	defer ds.Close()
	s := ds.Store
	saves := modelSeries(9, []string{"enc.w", "dec.w"}, 150_000, 3)
	other := modelSeries(10, []string{"head.w"}, 150_000, 1)[0]
	ino0 := createFile(t, s, "unrelated")
	writeWith(t, s, ino0, "run/ckpt/other.safetensors", other)
	var prev meta.VersionID
	for k, data := range saves {
		tmp := []string{"run/ckpt/tmpa81kq", "run/ckpt/tmpzz09x", "run/ckpt/tmp3mmq1"}[k]
		final := []string{"run/ckpt/model-a.safetensors", "run/ckpt/model-b.safetensors", "run/ckpt/model-c.safetensors"}[k]
		ino := createFile(t, s, tmp[9:])
		writeWith(t, s, ino, tmp, data)
		fi := info(t, s, ino)
		if k > 0 && (fi.Reference != prev || fi.RefReason != meta.RefLayout) {
			t.Errorf("save %d: reference %d (%s %q), want %d by layout", k, fi.Reference, fi.RefReason, fi.RefPath, prev)
		}
		if err := s.Adopt(ino, final); err != nil {
			t.Fatal(err)
		}
		if fi := info(t, s, ino); fi.Family != policy.FamilyOf(final) {
			t.Errorf("after rename: family %q, want %q", fi.Family, policy.FamilyOf(final))
		}
		prev = fi.Version
	}
	mustCheck(t, s, true)
}

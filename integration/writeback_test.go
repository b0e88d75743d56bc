package integration

import (
	"os/exec"
	"testing"

	"github.com/ckptfs/ckptfs/chain/storedir"
)

// TestGBReferenceFromTier (issue 16): with --cache-mib large enough, the
// second save of a 1 GiB checkpoint finds every reference chunk in the
// reference tier: nothing is rebuilt through the delta chain from the
// device. (The default, 64 MiB, keeps the daemon's memory bounded instead:
// TestDaemonMemoryBounded.)
func TestGBReferenceFromTier(t *testing.T) {
	m := newMount(t, "--cache-mib", "1536")
	src := bigCheckpoint(t, t.TempDir(), 1<<30)
	for _, name := range []string{"ckpt-1.npy", "ckpt-2.npy"} {
		if out, err := exec.Command("cp", src, m.path(name)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", name, err, out)
		}
	}
	var rep storedir.Report
	m.liveStats(&rep)
	if rep.ChunksRebuilt != 0 || rep.TierHits < 4000 {
		t.Errorf("second save of 1 GiB: %d chunks rebuilt, %d served from the tier; want 0 and every chunk (4096)", rep.ChunksRebuilt, rep.TierHits)
	}
	if ref, err := getxattr(m.path("ckpt-2.npy"), "user.ckptfs.reference"); err != nil || ref == "0" || ref == "" {
		t.Errorf("ckpt-2.npy has no reference (%q, %v)", ref, err)
	}
	if !sameContent(t, src, m.path("ckpt-2.npy")) {
		t.Fatal("read back differs")
	}
}

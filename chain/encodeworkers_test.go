package chain

import (
	"runtime"
	"testing"
)

// TestEncodeWorkers: one worker per core; lowered workers double
// GOMAXPROCS, unless the user set it.
func TestEncodeWorkers(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "")
	if w := EncodeWorkers(0); w != procs || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("not lowered: %d workers, GOMAXPROCS %d; want %d and %d", w, runtime.GOMAXPROCS(0), procs, procs)
	}
	if w := EncodeWorkers(DefaultEncodeNice); w != procs || runtime.GOMAXPROCS(0) != 2*procs {
		t.Fatalf("lowered: %d workers, GOMAXPROCS %d; want %d and %d", w, runtime.GOMAXPROCS(0), procs, 2*procs)
	}
	runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "1")
	if w := EncodeWorkers(DefaultEncodeNice); w != procs || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("GOMAXPROCS set by the user: %d workers, GOMAXPROCS %d; want %d and %d", w, runtime.GOMAXPROCS(0), procs, procs)
	}
}

package detect

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// addGolden seeds f with the golden files whose names end in one of suffixes.
func addGolden(f *testing.F, suffixes ...string) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		for _, s := range suffixes {
			if strings.HasSuffix(e.Name(), s) {
				data, err := os.ReadFile(filepath.Join(goldenDir, e.Name()))
				if err != nil {
					f.Fatal(err)
				}
				f.Add(data, int64(len(data)))
			}
		}
	}
}

// fuzzMachine runs arbitrary bytes through a dispatcher forced to use the
// machine from mk (nil: let the dispatcher pick from the bytes and name).
func fuzzMachine(f *testing.F, name string, mk func() machine) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte("PK\x03\x04"), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, seed int64) {
		checkSplits(t, name, mk, data, seed)
	})
}

func FuzzDetect(f *testing.F) {
	addGolden(f, "")
	fuzzMachine(f, "x.bin", nil)
}

func FuzzTorchZip(f *testing.F) {
	addGolden(f, ".pt", ".npz")
	fuzzMachine(f, "x.pt", func() machine { return newZipMachine() })
}

func FuzzTorchLegacy(f *testing.F) {
	addGolden(f, "legacy-1.pt")
	fuzzMachine(f, "x.pt", func() machine { return newLegacyMachine() })
}

func FuzzNpy(f *testing.F) {
	addGolden(f, ".npy")
	fuzzMachine(f, "x.npy", func() machine { return newNpyMachine("npy", true) })
}

func FuzzSafetensors(f *testing.F) {
	addGolden(f, ".safetensors")
	fuzzMachine(f, "x.safetensors", func() machine { return newSafetensorsMachine() })
}

func FuzzCaffe(f *testing.F) {
	addGolden(f, ".caffemodel")
	fuzzMachine(f, "x.caffemodel", func() machine { return newCaffeMachine(caffeModel) })
}

func FuzzSolverstate(f *testing.F) {
	addGolden(f, ".solverstate")
	fuzzMachine(f, "x.solverstate", func() machine { return newCaffeMachine(caffeSolver) })
}

// FuzzPickle feeds arbitrary bytes to the pickle reader in two splits: it must
// never panic, and where STOP is found must not depend on the split.
func FuzzPickle(f *testing.F) {
	f.Add([]byte("\x80\x02}q\x00.junk"), 3)
	f.Add([]byte(pk{0x80, 2}.storagePid("FloatStorage", "0", 3).op('.')), 5)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		a := newPickleReader()
		na := a.feed(data)
		b := newPickleReader()
		if cut < 0 {
			cut = -cut
		}
		cut %= len(data) + 1
		nb := b.feed(data[:cut])
		if nb == cut && !b.done {
			nb += b.feed(data[cut:])
		}
		if na != nb || a.done != b.done || len(a.order) != len(b.order) {
			t.Fatalf("whole: %d done=%v storages=%d; cut at %d: %d done=%v storages=%d",
				na, a.done, len(a.order), cut, nb, b.done, len(b.order))
		}
	})
}

// FuzzDCP labels first, then gap, then a small valid torch archive, as in a
// .distcp: whatever first and gap hold (truncated archives, end records with
// odd lengths, garbage, partial signatures), labelling must cover every byte
// identically for any piece sizes.
func FuzzDCP(f *testing.F) {
	next := torchArchive(f, []uint32{2, 1}, "")
	golden, err := os.ReadFile(filepath.Join(goldenDir, "ckpt-1.pt"))
	if err != nil {
		f.Fatal(err)
	}
	a := torchArchive(f, []uint32{3}, "c")
	f.Add(a, []byte{}, int64(1))
	f.Add(withZip64End(a), []byte("PK\x03"), int64(2))
	f.Add(golden, []byte("raw bytes PK\x05\x06"), int64(3))
	f.Add(slices.Concat(a, []byte("PK\x03\x04"), make([]byte, 26)), []byte("P"), int64(4))
	f.Add(torchArchive(f, nil, ""), []byte("PK\x01\x02"), int64(5))
	f.Fuzz(func(t *testing.T, first, gap []byte, seed int64) {
		checkSplits(t, "__0_0.distcp", nil, slices.Concat(first, gap, next), seed)
	})
}

package chain

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/ckptfs/ckptfs/chain/ckpttest"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// TestViewReadsCutFloats: a view of every save of a series reads the
// exact file with the low 16 bits of each float32 value zeroed and the
// header as it is, at every chain depth, in reads of any size and order;
// the views rounding to nearest read its values rounded.
// A split16 store rebuilds it from high planes alone; the default codec's
// store from the exact bytes; both give the same bytes.
func TestViewReadsCutFloats(t *testing.T) {
	for _, c := range []encode.Codec{encode.Split16, encode.DefaultCodec} {
		t.Run(c.String(), func(t *testing.T) {
			s := openCodecStore(t, c)
			series := ckpttest.TrainingSeries(51, 300_000, 6)
			rng := rand.New(rand.NewSource(51))
			depths := map[uint32]bool{}
			for k, vals := range series {
				name := fmt.Sprintf("ckpt-%d.npy", k)
				data := ckpttest.NpyFile(vals)
				writeFile(t, s, name, data, 1<<20)
				info := fileInfo(t, s, name)
				depths[info.Depth] = true
				want := bytes.Clone(data)
				encode.TruncateFloat32(want[128:]) // the npy header is 128 bytes
				s.DropCaches()
				got := readView(t, s, info.Version, rng)
				if !bytes.Equal(got, want) {
					i := 0
					for i < len(got) && got[i] == want[i] {
						i++
					}
					t.Fatalf("%s: view differs from the cut exact bytes at byte %d of %d", name, i, len(want))
				}
				for _, p := range []Precision{BF16Nearest, FP16} {
					want := bytes.Clone(data)
					p.apply(want[128:])
					if got := readPrecision(t, s, info.Version, p, rng); !bytes.Equal(got, want) {
						t.Fatalf("%s: view %s differs from the exact bytes rounded", name, p)
					}
				}
				if exact := readFile(t, s, name); !bytes.Equal(exact, data) {
					t.Fatalf("%s: exact read changed", name)
				}
			}
			if !depths[3] {
				t.Fatalf("no save at depth 3: %v", depths)
			}
			// Exact reads rebuilt from the device (all but the newest,
			// which the reference tier holds).
			s.DropCaches()
			for k, vals := range series {
				if got := readFile(t, s, fmt.Sprintf("ckpt-%d.npy", k)); !bytes.Equal(got, ckpttest.NpyFile(vals)) {
					t.Fatalf("ckpt-%d.npy: exact read differs", k)
				}
			}
			high, forms := s.viewsFromHigh.Load(), s.splitForms.Load()
			if c == encode.Split16 && (high == 0 || forms == 0) || c != encode.Split16 && (high != 0 || forms != 0) {
				t.Fatalf("%s store: %d view chunks rebuilt from high planes, %d exact ones in split form", c, high, forms)
			}
		})
	}
}

// openCodecStore is a store of the default policy coding with c.
func openCodecStore(t *testing.T, c encode.Codec) *Store {
	t.Helper()
	p := policy.Default()
	p.Codec = c
	ds := openTestStore(t, "", p)
	t.Cleanup(func() { ds.Close() })
	return ds.Store
}

// readView reads a version's view whole, in pieces of random sizes, the
// first half in order and the rest backwards.
func readView(t *testing.T, s *Store, id meta.VersionID, rng *rand.Rand) []byte {
	t.Helper()
	return readPrecision(t, s, id, BF16, rng)
}

// readPrecision is readView of the view at precision p.
func readPrecision(t *testing.T, s *Store, id meta.VersionID, p Precision, rng *rand.Rand) []byte {
	t.Helper()
	r, err := s.OpenPrecision(id, p)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, r.Size())
	var pieces [][2]int
	for off := 0; off < len(out); {
		n := min(len(out)-off, 1+rng.Intn(600_000))
		pieces = append(pieces, [2]int{off, n})
		off += n
	}
	half := len(pieces) / 2
	order := append([][2]int(nil), pieces[:half]...)
	for i := len(pieces) - 1; i >= half; i-- {
		order = append(order, pieces[i])
	}
	for _, pc := range order {
		if n, err := r.ReadAt(out[pc[0]:pc[0]+pc[1]], int64(pc[0])); n != pc[1] || err != nil && err != io.EOF {
			t.Fatalf("view read at %d: %d bytes, %v", pc[0], n, err)
		}
	}
	return out
}

// TestRepackCodecSplit16: a store saved with the default codec, repacked
// to split16, keeps every file byte-identical, passes a deep check, codes
// every file with split16, and its view decodes high planes alone; the
// store's policy now says split16.
func TestRepackCodecSplit16(t *testing.T) {
	ds := openTestStore(t, "", policy.Default())
	s := ds.Store
	series := ckpttest.TrainingSeries(52, 200_000, 7)
	var files [][]byte
	for k, vals := range series {
		data := ckpttest.NpyFile(vals)
		files = append(files, data)
		writeFile(t, s, fmt.Sprintf("ckpt-%d.npy", k), data, 1<<20)
	}
	codec := encode.Split16
	rep, err := s.Repack(RepackOptions{MaxDepth: 3, Codec: &codec})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Codec != "split16" || s.Policy().Codec != encode.Split16 {
		t.Fatalf("report codec %q, policy %s", rep.Codec, s.Policy().Codec)
	}
	mustCheck(t, s, true)
	rng := rand.New(rand.NewSource(52))
	for k, data := range files {
		name := fmt.Sprintf("ckpt-%d.npy", k)
		if got := readFile(t, s, name); !bytes.Equal(got, data) {
			t.Fatalf("%s changed", name)
		}
		info := fileInfo(t, s, name)
		if info.Codec != "split16" {
			t.Errorf("%s: codec %s after the repack", name, info.Codec)
		}
		want := bytes.Clone(data)
		encode.TruncateFloat32(want[128:])
		s.DropCaches()
		if got := readView(t, s, info.Version, rng); !bytes.Equal(got, want) {
			t.Fatalf("%s: view differs after the repack", name)
		}
	}
	if s.viewsFromHigh.Load() == 0 {
		t.Fatal("no view chunk rebuilt from high planes after the repack")
	}
	if _, err := s.Repack(RepackOptions{MaxDepth: 3, Codec: &codec, DryRun: true}); err == nil {
		t.Error("a dry run with a codec change was accepted")
	}
	// The store records split16 for the mounts to come.
	if got, err := StoredPolicy(ds.Medium.DB, policy.Default(), true); err != nil || got.Codec != encode.Split16 {
		t.Errorf("stored policy %v, %v", got, err)
	}
	ds.Close()
}

// npzFile is an .npz archive (stored, as np.savez writes) of float32
// arrays, one member per array.
func npzFile(t *testing.T, arrays ...[]float32) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i, a := range arrays {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("arr_%d.npy", i), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(ckpttest.NpyFile(a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestViewNpzCRC: the view of an .npz series is a valid zip whose members'
// CRC-32s match their cut bytes (Python's zipfile, under np.load, checks
// them), in stores of both codecs; each member is its exact array cut.
func TestViewNpzCRC(t *testing.T) {
	for _, c := range []encode.Codec{encode.Split16, encode.DefaultCodec} {
		t.Run(c.String(), func(t *testing.T) {
			s := openCodecStore(t, c)
			weights := ckpttest.TrainingSeries(53, 200_000, 3)
			moments := ckpttest.TrainingSeries(54, 90_000, 3)
			rng := rand.New(rand.NewSource(53))
			for k := range weights {
				name := fmt.Sprintf("ckpt-%d.npz", k)
				writeFile(t, s, name, npzFile(t, weights[k], moments[k]), 1<<20)
				s.DropCaches()
				got := readView(t, s, fileInfo(t, s, name).Version, rng)
				zr, err := zip.NewReader(bytes.NewReader(got), int64(len(got)))
				if err != nil {
					t.Fatalf("%s: view is no zip: %v", name, err)
				}
				for i, want := range [][]float32{weights[k], moments[k]} {
					rc, err := zr.File[i].Open()
					if err != nil {
						t.Fatal(err)
					}
					member, err := io.ReadAll(rc) // checks the member's CRC-32 at its end
					if err != nil {
						t.Fatalf("%s member %d in the view: %v", name, i, err)
					}
					cut := ckpttest.NpyFile(want)
					encode.TruncateFloat32(cut[128:])
					if !bytes.Equal(member, cut) {
						t.Fatalf("%s member %d: not the exact array cut", name, i)
					}
				}
			}
		})
	}
}

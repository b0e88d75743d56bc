package chain

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/encode/analyze"
)

// TestRepackTierMoments tiers real torch.save checkpoints (a model and
// its Adam state, shared/fixtures/writers/torch) with bf16 for the weights
// and m4 for the optimizer moments: each tiered file's float32 storages
// read back as the rounding of their role, by the names data.pkl gives
// them, its zip CRCs still valid; the files are marked "bf16+m4", and the
// report states both bounds.
func TestRepackTierMoments(t *testing.T) {
	requireWriterFixtures(t)
	ds := openTestStore(t, "", deepChains())
	defer ds.Close()
	s := ds.Store
	exact := map[string][]byte{}
	for _, name := range []string{"ckpt_0010.pt", "ckpt_0020.pt", "ckpt_0030.pt"} {
		b, err := os.ReadFile(filepath.Join(traceWritersDir, "torch", name))
		if err != nil {
			t.Fatal(err)
		}
		exact[name] = b
		writeFile(t, s, name, b, 1<<16)
	}
	rep, err := s.Repack(RepackOptions{MaxDepth: 2, Lossy: encode.LossyBF16, LossyMoments: encode.LossyM4, ExactNewest: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lossy != "bf16+m4" || !strings.Contains(rep.Bound, "exp_avg_sq") || !strings.Contains(rep.Bound, "2^-5") {
		t.Errorf("report: lossy %q, bound %q", rep.Lossy, rep.Bound)
	}
	for name, want := range exact {
		got := readFile(t, s, name)
		info := fileInfo(t, s, name)
		if name == "ckpt_0030.pt" {
			if info.Fidelity != "exact" || !bytes.Equal(got, want) {
				t.Errorf("%s, the newest: fidelity %s, exact %v", name, info.Fidelity, bytes.Equal(got, want))
			}
			continue
		}
		if info.Fidelity != "bf16+m4" {
			t.Errorf("%s: fidelity %s, want bf16+m4", name, info.Fidelity)
		}
		moments, weights := checkRoles(t, name, want, got)
		if moments == 0 || weights == 0 {
			t.Errorf("%s: %d moment and %d other float32 storages: the fixture tests nothing", name, moments, weights)
		}
	}
	mustCheck(t, s, true)
}

// checkRoles compares the storages of a tiered torch.save zip (got) with
// its exact bytes: each float32 value is its m4 rounding in a storage
// whose name ends in an optimizer moment, else its bf16 rounding. The
// zip's CRCs must hold. It counts the storages of each kind.
func checkRoles(t *testing.T, name string, exact, got []byte) (moments, weights int) {
	t.Helper()
	ez, err := zip.NewReader(bytes.NewReader(exact), int64(len(exact)))
	if err != nil {
		t.Fatal(err)
	}
	gz, err := zip.NewReader(bytes.NewReader(got), int64(len(got)))
	if err != nil {
		t.Fatalf("%s read back is no zip: %v", name, err)
	}
	var names map[string]string
	for _, f := range ez.File {
		if strings.HasSuffix(f.Name, "/data.pkl") {
			names = analyze.StorageNames(readMember(t, f))
		}
	}
	for i, f := range ez.File {
		dir, rest, _ := strings.Cut(f.Name, "/")
		role, ok := names[rest]
		if !ok || dir == "" {
			continue
		}
		e, g := readMember(t, f), readMember(t, gz.File[i]) // a CRC failure fails the read
		isMoment := momentNames[role[strings.LastIndexByte(role, '.')+1:]]
		round := encode.RoundBF16
		if isMoment {
			round = func(x float32) float32 { return encode.RoundMantissa(x, 4) }
		}
		floats := len(e)%4 == 0 && !bytes.Equal(e, g) // ints and bools are left as they are
		for k := 0; floats && k+4 <= len(e); k += 4 {
			x := math.Float32frombits(binary.LittleEndian.Uint32(e[k:]))
			if want := round(x); binary.LittleEndian.Uint32(g[k:]) != math.Float32bits(want) {
				t.Fatalf("%s: %s (%s) value %d: %v, want %v", name, f.Name, role, k/4, math.Float32frombits(binary.LittleEndian.Uint32(g[k:])), want)
			}
		}
		if floats && isMoment {
			moments++
		} else if floats {
			weights++
		}
	}
	return moments, weights
}

func readMember(t *testing.T, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", f.Name, err))
	}
	return b
}

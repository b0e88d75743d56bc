package encode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The chunk format is on disk: chunks written by format version 1 must
// decode forever. testdata/format-v1 holds one chunk per codec, dtype and
// kind, made from a pseudo-random walk stored beside them; this test
// decodes them. After a
// deliberate format change, add a new directory for the new version (never
// rewrite an old one); CKPTFS_UPDATE_GOLDEN=1 writes the files of a
// directory that does not exist yet.
func TestGoldenChunks(t *testing.T) {
	dir := filepath.Join("testdata", "format-v1")
	write := false
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if os.Getenv("CKPTFS_UPDATE_GOLDEN") != "1" {
			t.Fatalf("%s missing (CKPTFS_UPDATE_GOLDEN=1 creates it)", dir)
		}
		write = true
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dt := range []DType{Float32, BFloat16, Float64, Bytes} {
		rng := rand.New(rand.NewPCG(21, uint64(dt)))
		plain, ref := genPair(rng, dt, 500, "walk")
		// The inputs are stored too, so the test does not depend on the
		// random generator staying the same.
		for name, b := range map[string]*[]byte{"plain": &plain, "ref": &ref} {
			file := filepath.Join(dir, fmt.Sprintf("%s-%s.bin", name, dt))
			if write {
				if err := os.WriteFile(file, *b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if *b, err = os.ReadFile(file); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range Codecs() {
			for _, kind := range []string{"base", "delta"} {
				r := ref
				if kind == "base" {
					r = nil
				}
				name := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.chunk", c, dt, kind))
				if write {
					enc, err := Encode(nil, c, dt, plain, r)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(name, enc, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				enc, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				out, err := Decode(nil, enc, ref)
				if err != nil || !bytes.Equal(out, plain) {
					t.Errorf("%s: golden chunk no longer decodes: %v", name, err)
				}
			}
		}
	}
}

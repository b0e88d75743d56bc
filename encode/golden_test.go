package encode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The chunk format is on disk: chunks written by format versions 2 and 3
// must decode forever. testdata/format-vN holds one chunk per codec, dtype
// and kind (format 3 also one with nested sparse records), made from a pseudo-random walk stored beside them; this test
// decodes them. After a deliberate format change, add a new directory for
// the new version (never rewrite an old one); CKPTFS_UPDATE_GOLDEN=1 writes
// the files of a directory that does not exist yet, and the chunks of a
// codec appended to the format since (a missing file, never an existing one). (Version 1, whose
// planes payload had no groups, was never written by a store and is not
// decoded any more.)
func TestGoldenChunks(t *testing.T) {
	for v := minFormatVersion; v <= formatVersion; v++ {
		t.Run(fmt.Sprintf("format-v%d", v), func(t *testing.T) { goldenChunks(t, v) })
	}
}

// goldenChunks checks the chunks of format version v; only the current
// version's may be written (CKPTFS_UPDATE_GOLDEN).
func goldenChunks(t *testing.T, v int) {
	dir := filepath.Join("testdata", fmt.Sprintf("format-v%d", v))
	current := v == formatVersion
	write := false
	if _, err := os.Stat(dir); os.IsNotExist(err) && current {
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
				if write || current && appendGolden(name) {
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
		if dt != Bytes {
			goldenGrouped(t, dir, dt, plain, ref, write)
		}
	}
	goldenScaled(t, dir, current)
	if v >= 3 {
		goldenNested(t, dir, write)
	}
}

// appendGolden reports whether a missing golden file may be written now.
func appendGolden(name string) bool {
	_, err := os.Stat(name)
	return os.IsNotExist(err) && os.Getenv("CKPTFS_UPDATE_GOLDEN") == "1"
}

// writeGolden writes golden files, name to content.
func writeGolden(t *testing.T, files map[string][]byte) {
	t.Helper()
	for f, b := range files {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readGolden reads golden files.
func readGolden(t *testing.T, names ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(names))
	for i, f := range names {
		var err error
		if out[i], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// goldenScaled covers the scaled codec's scaled-reference record: a decaying
// float32 pair and its bfloat16 halves (inputs stored beside the chunks).
func goldenScaled(t *testing.T, dir string, current bool) {
	p32, r32 := decayPair(21, 2000, 0.88)
	for _, c := range []struct {
		dt         DType
		plain, ref []byte
	}{{Float32, p32, r32}, {BFloat16, toBF16(p32), toBF16(r32)}} {
		name := filepath.Join(dir, fmt.Sprintf("scaled-%s-predscale.chunk", c.dt))
		plainName, refName := filepath.Join(dir, fmt.Sprintf("scaled-plain-%s.bin", c.dt)), filepath.Join(dir, fmt.Sprintf("scaled-ref-%s.bin", c.dt))
		if current && appendGolden(name) {
			enc, err := Encode(nil, Scaled, c.dt, c.plain, c.ref)
			if err != nil || enc[headerLen] != predScale {
				t.Fatalf("%s: scaled record not taken (%v)", name, err)
			}
			writeGolden(t, map[string][]byte{name: enc, plainName: c.plain, refName: c.ref})
		}
		bufs := readGolden(t, name, plainName, refName)
		if bufs[0][headerLen] != predScale {
			t.Errorf("%s: not a scaled-reference record", name)
		}
		out, err := Decode(nil, bufs[0], bufs[2])
		if err != nil || !bytes.Equal(out, bufs[1]) {
			t.Errorf("%s: golden chunk no longer decodes: %v", name, err)
		}
	}
}

// goldenGrouped covers the planes codec's grouped and masked records: the
// walk with every third element unchanged, coded with forced groupings.
func goldenGrouped(t *testing.T, dir string, dt DType, plain, ref []byte, write bool) {
	w := dt.Width()
	same := append([]byte(nil), plain...)
	for i := 0; i+w <= len(same); i += 3 * w {
		copy(same[i:i+w], ref[i:i+w])
	}
	cd := NewCoder()
	for _, c := range []planeChoice{
		{mode: modeSUB, grp: quantileGroups(ref, w, 3, true)},
		{mode: modeXOR, grp: quantileGroups(ref, w, 2, false)},
		{mode: modeBase, grp: grouping{k: 1, masked: true}},
		{mode: modeBase, grp: quantileGroups(ref, w, 4, false)},
	} {
		name := filepath.Join(dir, fmt.Sprintf("planes-%s-grouped-m%d-k%d-mask%t.chunk", dt, c.mode, c.grp.k, c.grp.masked))
		if write {
			cd.pl.forceChoice = &c
			enc, err := cd.Encode(nil, Planes, dt, same, ref)
			cd.pl.forceChoice = nil
			if err != nil {
				t.Fatal(err)
			}
			if enc[headerLen]&modeFlags == 0 {
				t.Fatalf("%s: forced grouping not taken", name)
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
		if err != nil || !bytes.Equal(out, same) {
			t.Errorf("%s: golden chunk no longer decodes: %v", name, err)
		}
	}
}

// quantileGroups cuts the reference's context bytes into at most k groups
// of similar size, so that every group of a golden chunk has elements.
func quantileGroups(ref []byte, w, k int, masked bool) grouping {
	n := len(ref) / w
	var hist [256]int
	for i := 0; i < n; i++ {
		hist[byte(loadWord(ref[i*w:], w)>>ctxShift(w))]++
	}
	g := grouping{k: 1, masked: masked}
	acc := 0
	for c := 0; c < 256 && g.k < k; c++ {
		if acc >= g.k*n/k {
			g.thr[g.k-1] = byte(c)
			g.k++
		}
		acc += hist[c]
	}
	return g
}

// goldenNested covers format 3's nested sparse records: a float32 delta
// whose changed elements come in runs, so the gaps of its sparse planes
// are mostly zero (inputs stored beside the chunk).
func goldenNested(t *testing.T, dir string, write bool) {
	name := filepath.Join(dir, "scaled-float32-nested.chunk")
	plainName, refName := filepath.Join(dir, "nested-plain-float32.bin"), filepath.Join(dir, "nested-ref-float32.bin")
	if write || appendGolden(name) {
		plain, ref := clusteredPair(rand.New(rand.NewPCG(23, 5)), 1<<14)
		cd := NewCoder()
		enc, err := cd.Encode(nil, Scaled, Float32, plain, ref)
		if err != nil || cd.pl.stats.Nested == 0 {
			t.Fatalf("%s: no nested sparse record (%v)", name, err)
		}
		writeGolden(t, map[string][]byte{name: enc, plainName: plain, refName: ref})
	}
	bufs := readGolden(t, name, plainName, refName)
	out, err := Decode(nil, bufs[0], bufs[2])
	if err != nil || !bytes.Equal(out, bufs[1]) {
		t.Errorf("%s: golden chunk no longer decodes: %v", name, err)
	}
}

// clusteredPair is n float32 values of a random walk and the same values
// each moved by up to 255 ulps, and runs of 4-19 of them (a twentieth in
// all) by up to 2^20: the high planes of the delta are sparse, clustered.
func clusteredPair(rng *rand.Rand, n int) (plain, ref []byte) {
	ref = make([]byte, 4*n)
	x := 0.01
	for i := range n {
		x += (rng.Float64() - 0.5) * 1e-4
		binary.LittleEndian.PutUint32(ref[4*i:], math.Float32bits(float32(x)))
	}
	plain = bytes.Clone(ref)
	for i := range n {
		v := binary.LittleEndian.Uint32(plain[4*i:])
		binary.LittleEndian.PutUint32(plain[4*i:], v+uint32(rng.IntN(256)))
	}
	for i := 0; i < n; {
		if rng.Float64() < 0.05/12 {
			for k := 4 + rng.IntN(16); k > 0 && i < n; k-- {
				v := binary.LittleEndian.Uint32(plain[4*i:])
				binary.LittleEndian.PutUint32(plain[4*i:], v+uint32(rng.IntN(1<<20)))
				i++
			}
			continue
		}
		i++
	}
	return plain, ref
}

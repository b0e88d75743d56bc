package chain

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// FuzzCommitFileSpare: a staged file (CommitFile, which reads the staging
// file straight into the chunks being filled: Writer.ReadFrom) commits to
// the same chunks, and reads back the same bytes, as the same content
// written in pieces of any size (WriteAt). Reading into the chunks changes
// how the bytes move, never which bytes land where. The content is a
// safetensors file of tensors of mixed dtypes and sizes (empty, a few
// bytes, several chunks; some all zeros, whose chunks go back to the pool
// at once, while the bytes after them may still lie in their buffer), and
// its runs of zeros are holes in the staging file.
func FuzzCommitFileSpare(f *testing.F) {
	for seed := int64(1); seed <= 6; seed++ {
		f.Add(seed, uint8(seed*7), uint16(seed*1000))
	}
	f.Fuzz(func(t *testing.T, seed int64, tensors uint8, piece uint16) {
		rng := rand.New(rand.NewSource(seed))
		content, bounds := mixedSafetensors(rng, int(tensors)%48+1)
		ds := openTestStore(t, "", policy.Default())
		defer ds.Close()
		s := ds.Store

		pieces := map[int64][]byte{}
		const block = 64 << 10
		for off := 0; off < len(content); off += block {
			if b := content[off:min(off+block, len(content))]; !allZero(b) {
				pieces[int64(off)] = b
			}
		}
		staged := createFile(t, s, "staged.safetensors")
		if err := s.CommitFile(staged, "staged.safetensors", stagedFile(t, int64(len(content)), pieces), 1); err != nil {
			t.Fatal(err)
		}
		written := writeFile(t, s, "written.safetensors", content, int(piece)%(3<<20)+1)

		// ReadFrom calls that end anywhere, at a tensor's first or last
		// byte too, so that a read into a chunk's room starts a segment.
		cuts := map[int64]bool{int64(len(content)): true}
		for _, b := range bounds {
			cuts[b+int64(rng.Intn(3))-1] = true
		}
		for range 8 {
			cuts[rng.Int63n(int64(len(content)))] = true
		}
		cut := createFile(t, s, "cut.safetensors")
		w, err := s.NewWriter(cut, pathIs("cut.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, int(piece)%(1<<20)+1)
		for off := int64(0); off < int64(len(content)); {
			end := off + 1
			for end < int64(len(content)) && !cuts[end] {
				end++
			}
			if err := w.ReadFrom(bytes.NewReader(content), off, end-off, 1, buf); err != nil {
				t.Fatal(err)
			}
			off = end
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}

		want := chunksOf(t, s, written)
		for _, name := range []string{"staged.safetensors", "written.safetensors", "cut.safetensors"} {
			if got := readFile(t, s, name); !bytes.Equal(got, content) {
				t.Fatalf("%s: %d bytes read back differ from the %d written", name, len(got), len(content))
			}
		}
		for name, ino := range map[string]meta.Ino{"staged": staged, "cut": cut} {
			got := chunksOf(t, s, ino)
			if len(got) != len(want) {
				t.Fatalf("%s: %d chunks, written in pieces: %d", name, len(got), len(want))
			}
			for i := range got {
				if g, w := got[i], want[i]; g.Offset != w.Offset || g.Length != w.Length || g.Segment != w.Segment || g.Index != w.Index {
					t.Fatalf("%s: chunk %d is %+v, written in pieces %+v", name, i, g, w)
				}
			}
		}
		mustCheck(t, s, true)
	})
}

// mixedSafetensors is a safetensors file of n tensors of random dtypes and
// sizes: empty, a few elements, up to three default chunks; a fifth of
// them all zeros, the rest random values. It returns the file and the
// offsets where each tensor's bytes start.
func mixedSafetensors(rng *rand.Rand, n int) ([]byte, []int64) {
	dtypes := []struct {
		name  string
		width int
	}{{"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F64", 8}, {"I64", 8}, {"U8", 1}}
	chunkElems := policy.DefaultLayout().ChunkElems
	var hdr strings.Builder
	var data []byte
	var starts []int
	hdr.WriteString("{")
	for i := range n {
		dt := dtypes[rng.Intn(len(dtypes))]
		var elems int
		switch rng.Intn(4) {
		case 0:
			elems = rng.Intn(4)
		case 1:
			elems = rng.Intn(5000)
		default:
			elems = rng.Intn(3*chunkElems + 1)
		}
		start := len(data)
		starts = append(starts, start)
		data = append(data, make([]byte, elems*dt.width)...)
		if rng.Intn(5) != 0 {
			t := data[start:]
			for k := 0; k+4 <= len(t); k += 4 {
				binary.LittleEndian.PutUint32(t[k:], math.Float32bits(float32(rng.NormFloat64()*0.02)))
			}
		}
		if i > 0 {
			hdr.WriteString(",")
		}
		fmt.Fprintf(&hdr, "%q:{\"dtype\":%q,\"shape\":[%d],\"data_offsets\":[%d,%d]}", fmt.Sprintf("t%d", i), dt.name, elems, start, len(data))
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteString(" ")
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len()))
	out = append(out, hdr.String()...)
	bounds := make([]int64, len(starts))
	for i, st := range starts {
		bounds[i] = int64(len(out) + st)
	}
	return append(out, data...), bounds
}

package detect

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// zipTensors lists, from Go's archive/zip (independently of the detector),
// the torch tensor members of the archives concatenated in data: each
// archive ends at its end of central directory record and its comment. Keys
// are what the detector must give: "data/<key>" in the first archive,
// "<k>/data/<key>" in the k-th after it. Garbage between archives is
// skipped to the next local header signature.
func zipTensors(tb testing.TB, data []byte) (ts []expTensor, archives int) {
	tb.Helper()
	at := 0
	for {
		j := bytes.Index(data[at:], zipMagic)
		if j < 0 {
			return ts, archives
		}
		start := at + j
		e := bytes.Index(data[start:], []byte("PK\x05\x06"))
		if e < 0 || start+e+22 > len(data) {
			tb.Fatalf("archive at %d has no end record", start)
		}
		end := start + e + 22 + int(binary.LittleEndian.Uint16(data[start+e+20:]))
		zr, err := zip.NewReader(bytes.NewReader(data[start:end]), int64(end-start))
		if err != nil {
			tb.Fatalf("archive at %d: %v", start, err)
		}
		prefix := ""
		if archives > 0 {
			prefix = strconv.Itoa(archives) + "/"
		}
		for _, f := range zr.File {
			_, rest, _ := strings.Cut(f.Name, "/")
			if !strings.HasPrefix(rest, "data/") || f.UncompressedSize64 == 0 {
				continue
			}
			off, err := f.DataOffset()
			if err != nil {
				tb.Fatal(err)
			}
			ts = append(ts, expTensor{Key: prefix + rest, Offset: int64(start) + off, Length: int64(f.UncompressedSize64)})
		}
		archives++
		at = end
	}
}

// withoutDType drops the dtypes, which zipTensors cannot know.
func withoutDType(ts []expTensor) []expTensor {
	out := slices.Clone(ts)
	for i := range out {
		out[i].DType = ""
	}
	return out
}

// TestDCPFixture labels the .distcp files torch.distributed.checkpoint wrote:
// every tensor of every archive is found at the offsets archive/zip gives,
// and the keys are the same in each save.
func TestDCPFixture(t *testing.T) {
	var prev []keyShape
	for _, step := range []string{"step-10", "step-20", "step-30"} {
		rel := "dcp/" + step + "/__0_0.distcp"
		data := writerFixture(t, rel)
		spans, format := invariant(t, rel, data)
		want, archives := zipTensors(t, data)
		got := tensorsOf(spans)
		if format != "dcp" || archives < 2 || !slices.Equal(withoutDType(got), want) {
			t.Fatalf("%s: %s, %d archives; tensors\n got %v\nwant %v", rel, format, archives, got, want)
		}
		var tensor, max int64
		for _, s := range got {
			tensor += s.Length
		}
		for _, s := range want {
			max += s.Length
		}
		frac := float64(tensor) / float64(len(data))
		// Each of the archives carries ~1.3 KB of headers, pickle and
		// directory, so the tensors themselves are under 90% of this small
		// file; all of them must be found.
		t.Logf("%s: %d archives, %d tensors, %d of %d bytes tensor (%.4f; all tensor members hold %d)",
			rel, archives, len(got), tensor, len(data), frac, max)
		if frac < 0.85 || tensor != max {
			t.Errorf("%s: tensor fraction %.4f", rel, frac)
		}
		shapes := tensorShapes(spans)
		if prev != nil && !slices.Equal(prev, shapes) {
			t.Errorf("%s: keys, dtypes or lengths differ from the previous save", rel)
		}
		prev = shapes
	}
}

// torchArchive writes a torch.save-like archive with archive/zip (sizes in
// data descriptors, as torch does) holding float32 storages of the given
// element counts; comment is the archive comment.
func torchArchive(tb testing.TB, numels []uint32, comment string) []byte {
	tb.Helper()
	p := pk{0x80, 2}.op('(')
	for i, n := range numels {
		p = p.storagePid("FloatStorage", strconv.Itoa(i), n)
	}
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	put := func(name string, data []byte) {
		f, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err == nil {
			_, err = f.Write(data)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	put("archive/data.pkl", p.op('t', '.'))
	put("archive/byteorder", []byte("little"))
	for i, n := range numels {
		data := make([]byte, 4*n)
		for j := range data {
			data[j] = byte(i + j) // not a signature, not zero
		}
		put(fmt.Sprintf("archive/data/%d", i), data)
	}
	put("archive/version", []byte("3\n"))
	if err := w.SetComment(comment); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// withZip64End splices a zip64 end record and locator (as torch writes them)
// before an archive's end of central directory record.
func withZip64End(a []byte) []byte {
	e := bytes.LastIndex(a, []byte("PK\x05\x06"))
	z := []byte("PK\x06\x06")
	z = binary.LittleEndian.AppendUint64(z, 44+3) // a 3-byte extensible data sector
	z = append(z, make([]byte, 44)...)
	z = append(z, "ext"...)
	z = append(z, "PK\x06\x07"...)
	z = append(z, make([]byte, 16)...)
	return slices.Concat(a[:e], z, a[e:])
}

func TestDCPConcatenations(t *testing.T) {
	a0 := torchArchive(t, []uint32{3, 5}, "")
	a1 := torchArchive(t, []uint32{7}, "a comment")
	empty := torchArchive(t, nil, "") // a byte item torch.save'd: no tensors
	cases := map[string][][]byte{
		"back to back":       {a0, a1, a1},
		"zip64 end records":  {withZip64End(a0), withZip64End(a1)},
		"byte items between": {a0, []byte("raw bytes PK\x03 PPK\x01\x02 PK"), empty, []byte("P"), a1},
		"comment like a sig": {torchArchive(t, []uint32{2}, "PK\x03"), []byte("\x04"), a1},
	}
	for name, parts := range cases {
		data := slices.Concat(parts...)
		spans, format := invariant(t, name, data)
		want, _ := zipTensors(t, data)
		if got := tensorsOf(spans); format != "dcp" || !slices.Equal(withoutDType(got), want) {
			t.Errorf("%s: %s\n got %v\nwant %v", name, format, got, want)
		}
		for _, s := range spans {
			if s.Kind == Tensor && s.DType.String() != "float32" {
				t.Errorf("%s: %v", name, s)
			}
		}
	}
}

// TestDCPKeys pins the keys: the first archive keeps today's keys, later ones
// are prefixed with their index (a byte item counts as an archive).
func TestDCPKeys(t *testing.T) {
	data := slices.Concat(torchArchive(t, []uint32{1, 1}, ""), torchArchive(t, nil, ""), []byte("junk"), torchArchive(t, []uint32{1}, ""))
	spans, format := invariant(t, "__0_0.distcp", data)
	var keys []string
	for _, s := range spans {
		if s.Kind == Tensor {
			keys = append(keys, s.Key)
		}
	}
	if want := []string{"data/0", "data/1", "2/data/0"}; format != "dcp" || !slices.Equal(keys, want) {
		t.Errorf("%s %v, want %v", format, keys, want)
	}
	// One torch archive followed by anything stays torch-zip.
	_, format = invariant(t, "x.pt", slices.Concat(torchArchive(t, []uint32{1}, ""), []byte("trailing bytes")))
	if format != "torch-zip" {
		t.Errorf("one archive and trailing bytes: %s", format)
	}
}

// TestDCPBogusSignature: a local header signature inside a byte item starts a
// record that makes no sense; the walker looks further instead of giving up
// the rest of the file.
func TestDCPBogusSignature(t *testing.T) {
	bogus := append([]byte("PK\x03\x04"), make([]byte, 26)...) // a header of an empty member
	bogus = append(bogus, "not a signature"...)
	data := slices.Concat(torchArchive(t, []uint32{2}, ""), bogus, torchArchive(t, []uint32{4}, ""))
	spans, format := invariant(t, "__0_0.distcp", data)
	var keys []string
	for _, s := range spans {
		if s.Kind == Tensor {
			keys = append(keys, s.Key)
		}
	}
	if want := []string{"data/0", "2/data/0"}; format != "dcp" || !slices.Equal(keys, want) {
		t.Errorf("%s %v, want %v", format, keys, want)
	}
}

// TestDCPDamaged cuts and mutates concatenations before a valid archive: the
// labels must cover every byte identically for any piece sizes (FuzzDCP does
// this at length).
func TestDCPDamaged(t *testing.T) {
	next := torchArchive(t, []uint32{2, 1}, "")
	a := torchArchive(t, []uint32{3}, "c")
	seeds := [][]byte{slices.Concat(a, a), withZip64End(a), slices.Concat(a, []byte("PK\x03\x04"), make([]byte, 26))}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		d := slices.Clone(seeds[r.Intn(len(seeds))])
		for k := 1 + r.Intn(6); k > 0; k-- {
			d[r.Intn(len(d))] = byte(r.Intn(256))
		}
		checkSplits(t, "__0_0.distcp", nil, slices.Concat(d[:r.Intn(len(d)+1)], next), r.Int63())
	}
}

package detect

import (
	"slices"
	"testing"

	"github.com/ckptfs/ckptfs/encode"
)

func TestShortStreamIsRaw(t *testing.T) {
	for n := 0; n < sniffLen; n++ {
		data := []byte("PK\x03\x04PK\x03\x04PK\x03\x04PK\x03"[:n])
		spans, format := invariant(t, "x.pt", data)
		if format != "unknown" || (n > 0 && (len(spans) != 1 || spans[0].Kind != Raw)) {
			t.Errorf("%d bytes: %s %v", n, format, spans)
		}
	}
}

func TestGenericRanges(t *testing.T) {
	data := make([]byte, 2*genericChunk+100)
	copy(data, "some unknown file format")
	spans, format := invariant(t, "blob.dat", data)
	want := []Span{
		{Label: rawLabel, Offset: 0, Length: sniffLen, Region: 0},
		{Label: genericLabel(0), Offset: sniffLen, Length: genericChunk - sniffLen, Region: sniffLen},
		{Label: genericLabel(1), Offset: genericChunk, Length: genericChunk, Region: genericChunk},
		{Label: genericLabel(2), Offset: 2 * genericChunk, Length: 100, Region: 2 * genericChunk},
	}
	if format != "generic" || !slices.Equal(spans, want) {
		t.Errorf("%s\n got %v\nwant %v", format, spans, want)
	}
	if spans[1].DType != encode.Bytes || spans[1].Key != "generic/0" {
		t.Errorf("generic label %v", spans[1].Label)
	}
}

func TestCaffeHintIgnoresCase(t *testing.T) {
	for _, name := range []string{"a.caffemodel", "B_ITER_5.CaffeModel", "s.solverstate"} {
		if _, ok := caffeHint(name); !ok {
			t.Errorf("%s: no caffe hint", name)
		}
	}
	if _, ok := caffeHint("caffemodel.bin"); ok {
		t.Error("caffemodel.bin hinted as caffe")
	}
}

func TestMerge(t *testing.T) {
	a := Label{Kind: Tensor, Key: "a", DType: encode.Float32}
	in := []Span{
		{Label: rawLabel, Offset: 0, Length: 4, Region: 0},
		{Label: rawLabel, Offset: 4, Length: 4, Region: 0},
		{Label: a, Offset: 8, Length: 4, Region: 8},
		{Label: a, Offset: 12, Length: 0, Region: 8},
		{Label: a, Offset: 12, Length: 4, Region: 8},
		{Label: a, Offset: 16, Length: 4, Region: 16}, // same key, new region
	}
	want := []Span{
		{Label: rawLabel, Offset: 0, Length: 8, Region: 0},
		{Label: a, Offset: 8, Length: 8, Region: 8},
		{Label: a, Offset: 16, Length: 4, Region: 16},
	}
	prefix := []Span{{Label: a, Offset: -4, Length: 4, Region: -4}}
	got := Merge(slices.Clone(prefix), in)
	if !slices.Equal(got, append(prefix, want...)) {
		t.Errorf("got %v", got)
	}
}

func TestLabelAppendsToDst(t *testing.T) {
	d := New("x.npy")
	dst := []Span{{Offset: -1}}
	dst = d.Label(dst, []byte("\x93NUMPY\x01\x00"))
	if len(dst) != 2 || dst[0].Offset != -1 || dst[1].Offset != 0 || dst[1].Length != 8 {
		t.Errorf("%v", dst)
	}
}

package detect

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// zmember is one record of a hand-built zip.
type zmember struct {
	name      string
	data      []byte
	desc      int  // 0: sizes in the local header; 16 or 24: a data descriptor of that size
	headerLen bool // with desc: put the real sizes in the local header too
}

// buildZip writes members the way torch's writer (desc) or a seeking writer
// (sizes in the header) would, then a central directory signature and some
// directory bytes. It returns the bytes and each member's data offset.
func buildZip(members []zmember) ([]byte, []int64) {
	var b []byte
	var offs []int64
	for _, m := range members {
		h := make([]byte, 30)
		binary.LittleEndian.PutUint32(h, 0x04034b50)
		binary.LittleEndian.PutUint16(h[4:], 20)
		if m.desc != 0 {
			binary.LittleEndian.PutUint16(h[6:], 0x08)
		}
		if m.desc == 0 || m.headerLen {
			binary.LittleEndian.PutUint32(h[14:], crc32.ChecksumIEEE(m.data))
			binary.LittleEndian.PutUint32(h[18:], uint32(len(m.data)))
			binary.LittleEndian.PutUint32(h[22:], uint32(len(m.data)))
		}
		binary.LittleEndian.PutUint16(h[26:], uint16(len(m.name)))
		b = append(append(b, h...), m.name...)
		offs = append(offs, int64(len(b)))
		b = append(b, m.data...)
		switch m.desc {
		case 16:
			b = binary.LittleEndian.AppendUint32(b, 0x08074b50)
			b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(m.data))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(m.data)))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(m.data)))
		case 24:
			b = binary.LittleEndian.AppendUint32(b, 0x08074b50)
			b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(m.data))
			b = binary.LittleEndian.AppendUint64(b, uint64(len(m.data)))
			b = binary.LittleEndian.AppendUint64(b, uint64(len(m.data)))
		}
	}
	b = append(b, "PK\x01\x02 central directory, then PK\x05\x06 end"...)
	return b, offs
}

// pk is a tiny pickle writer for hand-made data.pkl files (protocol 2).
type pk []byte

func (p pk) op(ops ...byte) pk { return append(p, ops...) }
func (p pk) str(s string) pk {
	p = append(p, 'X')
	p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
	return append(p, s...)
}
func (p pk) global(mod, name string) pk { return append(p, "c"+mod+"\n"+name+"\n"...) }
func (p pk) int(n uint32) pk {
	p = append(p, 'J')
	return binary.LittleEndian.AppendUint32(p, n)
}

// storagePid appends a persistent id ('storage', torch.<typ>, key, 'cpu', numel)
// and BINPERSID.
func (p pk) storagePid(typ, key string, numel uint32) pk {
	return p.op('(').str("storage").global("torch", typ).str(key).str("cpu").int(numel).op('t', 'Q')
}

func ranges(spans []Span) []expTensor { return tensorsOf(spans) }

func TestZipDescriptorForms(t *testing.T) {
	pkl := pk{0x80, 2}.op('(').
		storagePid("FloatStorage", "0", 3).
		storagePid("HalfStorage", "1", 0). // an empty tensor
		storagePid("DoubleStorage", "2", 2).
		op('t', '.')
	f32 := make([]byte, 12)
	f64 := make([]byte, 16)
	for _, desc := range []int{16, 24} {
		data, offs := buildZip([]zmember{
			{name: "ck/data.pkl", data: pkl, desc: desc},
			{name: "ck/data/0", data: f32, desc: desc},
			{name: "ck/data/1", data: nil, desc: desc},
			{name: "ck/data/2", data: f64, desc: desc},
			{name: "ck/version", data: []byte("3\n"), desc: desc},
		})
		spans, format := invariant(t, "x.pt", data)
		want := []expTensor{{"data/0", "float32", offs[1], 12}, {"data/2", "float64", offs[3], 16}}
		if got := ranges(spans); format != "torch-zip" || !slices.Equal(got, want) {
			t.Errorf("desc %d: %s %v, want %v", desc, format, got, want)
		}
	}
}

func TestZipSizesInHeader(t *testing.T) {
	pkl := pk{0x80, 2}.storagePid("BFloat16Storage", "0", 4).op('.')
	// A writer that knows sizes: stored records with sizes in the local
	// header, with or without descriptors; the header size is the truth.
	for _, desc := range []int{0, 16} {
		data, offs := buildZip([]zmember{
			{name: "a/data.pkl", data: pkl, desc: desc, headerLen: true},
			{name: "a/data/0", data: make([]byte, 8), desc: desc, headerLen: true},
			{name: "a/data/9", data: make([]byte, 5), desc: desc, headerLen: true}, // not in the pickle
		})
		spans, format := invariant(t, "x.pt", data)
		want := []expTensor{{"data/0", "bfloat16", offs[1], 8}, {"data/9", "bytes", offs[2], 5}}
		if got := ranges(spans); format != "torch-zip" || !slices.Equal(got, want) {
			t.Errorf("desc %d: %s %v, want %v", desc, format, got, want)
		}
	}
}

func TestZipWrongLengthResyncs(t *testing.T) {
	// The pickle claims 2 floats but the record holds 3: after 8 bytes the
	// expected descriptor is missing, the scan finds the real one, and the
	// following record is still labelled.
	pkl := pk{0x80, 2}.op('(').storagePid("FloatStorage", "0", 2).storagePid("FloatStorage", "1", 1).op('t', '.')
	data, offs := buildZip([]zmember{
		{name: "a/data.pkl", data: pkl, desc: 16},
		{name: "a/data/0", data: make([]byte, 12), desc: 16},
		{name: "a/data/1", data: make([]byte, 4), desc: 16},
	})
	spans, _ := invariant(t, "x.pt", data)
	want := []expTensor{{"data/0", "float32", offs[1], 8}, {"data/1", "float32", offs[2], 4}}
	if got := ranges(spans); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Too long a claim swallows the descriptor: the rest is raw, never a panic.
	pkl = pk{0x80, 2}.storagePid("FloatStorage", "0", 100).op('.')
	data, _ = buildZip([]zmember{
		{name: "a/data.pkl", data: pkl, desc: 16},
		{name: "a/data/0", data: make([]byte, 12), desc: 16},
		{name: "a/data/1", data: make([]byte, 4), desc: 16},
	})
	spans, _ = invariant(t, "x.pt", data)
	if got := ranges(spans); len(got) != 1 || got[0].Key != "data/0" {
		t.Errorf("overlong: got %v", got)
	}
}

func TestZipUntypedStorageWithDType(t *testing.T) {
	// Newer torch: an untyped storage (numel counts bytes) with the dtype
	// beside it in the rebuild call's arguments.
	pkl := pk{0x80, 2}.global("torch._utils", "_rebuild_tensor_v3").op('(').
		op('(').str("storage").global("torch", "UntypedStorage").str("0").str("cpu").int(12).op('t', 'Q').
		int(0).global("torch", "float16").op('t', 'R', '.')
	data, offs := buildZip([]zmember{
		{name: "archive/data.pkl", data: pkl, desc: 16},
		{name: "archive/data/0", data: make([]byte, 12), desc: 16},
	})
	spans, _ := invariant(t, "x.pt", data)
	want := []expTensor{{"data/0", "float16", offs[1], 12}}
	if got := ranges(spans); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestZipOtherMembersRaw(t *testing.T) {
	data, _ := buildZip([]zmember{
		{name: "readme.txt", data: []byte("hello"), desc: 0},
		{name: "stream.bin", data: []byte("PK\x07\x08 looks like a descriptor but is not"), desc: 16},
		{name: "data/0", data: make([]byte, 8), desc: 0}, // no data.pkl: not a torch record
	})
	spans, format := invariant(t, "x.zip", data)
	if format != "zip" || len(ranges(spans)) != 0 || len(spans) != 1 {
		t.Errorf("%s %v", format, spans)
	}
}

func TestZipGarbageAfterRecord(t *testing.T) {
	data, _ := buildZip([]zmember{{name: "a.txt", data: []byte("x")}})
	data = append(data[:len(data)-len("PK\x01\x02 central directory, then PK\x05\x06 end")], "garbage that is no zip record"...)
	_, format := invariant(t, "x.zip", data)
	if format != "zip+generic" {
		t.Errorf("format %q", format)
	}
}

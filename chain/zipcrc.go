package chain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"sort"
	"strings"
)

// A zip archive (torch.save's format, NumPy's .npz) records the CRC-32 of
// each member in its local header, in the central directory and, if the
// writer streamed it, in a data descriptor after the data. An archive tier
// changes members' bytes, so it rewrites those fields too: the file stays a
// valid zip that unzip, Python's zipfile and torch.load accept.

// zipMember is one stored member of a zip archive.
type zipMember struct {
	name       string
	data, size int64   // the member's bytes (stored: compressed size = size)
	crcAt      []int64 // file offsets of its CRC-32 fields
	crc        uint32  // the CRC-32 recorded
}

// torchPickle reports whether m is the pickle torch.save writes its
// object into: data.pkl at the top of the archive's folder.
func (m zipMember) torchPickle() bool {
	return path.Base(m.name) == "data.pkl" && strings.Count(m.name, "/") <= 1
}

// errNotZip: the bytes end in no zip central directory that ckptfs can
// patch (several archives, a damaged or unusual directory).
var errNotZip = errors.New("no central directory to patch")

// zipMembers reads the central directory at the end of a file of size
// bytes, read through readAt. Only stored members are returned: the
// detectors label no tensor inside a compressed one.
func zipMembers(readAt func(p []byte, off int64) error, size int64) ([]zipMember, error) {
	const eocdLen, maxComment = 22, 0xffff
	tailLen := min(size, eocdLen+maxComment)
	tail := make([]byte, tailLen)
	if err := readAt(tail, size-tailLen); err != nil {
		return nil, err
	}
	at := -1
	for i := len(tail) - eocdLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(tail[i:]) == 0x06054b50 &&
			i+eocdLen+int(binary.LittleEndian.Uint16(tail[i+20:])) == len(tail) {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, errNotZip
	}
	eocd := tail[at:]
	entries := int64(binary.LittleEndian.Uint16(eocd[10:]))
	cdSize := int64(binary.LittleEndian.Uint32(eocd[12:]))
	cdOff := int64(binary.LittleEndian.Uint32(eocd[16:]))
	eocdOff := size - tailLen + int64(at)
	if entries == 0xffff || cdSize == 0xffffffff || cdOff == 0xffffffff {
		// Zip64: a locator just before the end record points at the
		// zip64 end record.
		if eocdOff < 20 {
			return nil, errNotZip
		}
		loc := make([]byte, 20)
		if err := readAt(loc, eocdOff-20); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(loc) != 0x07064b50 {
			return nil, errNotZip
		}
		z64 := make([]byte, 56)
		z64Off := int64(binary.LittleEndian.Uint64(loc[8:]))
		if z64Off < 0 || z64Off+56 > size {
			return nil, errNotZip
		}
		if err := readAt(z64, z64Off); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(z64) != 0x06064b50 {
			return nil, errNotZip
		}
		entries = int64(binary.LittleEndian.Uint64(z64[32:]))
		cdSize = int64(binary.LittleEndian.Uint64(z64[40:]))
		cdOff = int64(binary.LittleEndian.Uint64(z64[48:]))
	}
	const maxDirectory = 256 << 20
	if cdOff < 0 || cdSize < 0 || cdSize > maxDirectory || cdOff+cdSize > size || entries < 0 || entries > cdSize/46 {
		return nil, fmt.Errorf("%w: central directory of %d bytes at %d", errNotZip, cdSize, cdOff)
	}
	cd := make([]byte, cdSize)
	if err := readAt(cd, cdOff); err != nil {
		return nil, err
	}
	var out []zipMember
	local := make([]byte, 30)
	for p, i := 0, int64(0); i < entries; i++ {
		if p+46 > len(cd) || binary.LittleEndian.Uint32(cd[p:]) != 0x02014b50 {
			return nil, fmt.Errorf("%w: entry %d of the central directory", errNotZip, i)
		}
		h := cd[p:]
		flags := binary.LittleEndian.Uint16(h[8:])
		method := binary.LittleEndian.Uint16(h[10:])
		crc := binary.LittleEndian.Uint32(h[16:])
		csize := int64(binary.LittleEndian.Uint32(h[20:]))
		usize := int64(binary.LittleEndian.Uint32(h[24:]))
		nameLen, extraLen, commentLen := int(binary.LittleEndian.Uint16(h[28:])), int(binary.LittleEndian.Uint16(h[30:])), int(binary.LittleEndian.Uint16(h[32:]))
		lho := int64(binary.LittleEndian.Uint32(h[42:]))
		end := p + 46 + nameLen + extraLen + commentLen
		if end > len(cd) {
			return nil, fmt.Errorf("%w: entry %d overruns the central directory", errNotZip, i)
		}
		// The zip64 extra field holds, in order, the fields that read
		// all ones.
		for x := h[46+nameLen : 46+nameLen+extraLen]; len(x) >= 4; {
			id, n := binary.LittleEndian.Uint16(x), int(binary.LittleEndian.Uint16(x[2:]))
			if 4+n > len(x) {
				break
			}
			if id == 0x0001 {
				f := x[4 : 4+n]
				next := func(v *int64) {
					if *v == 0xffffffff && len(f) >= 8 {
						*v, f = int64(binary.LittleEndian.Uint64(f)), f[8:]
					}
				}
				next(&usize)
				next(&csize)
				next(&lho)
			}
			x = x[4+n:]
		}
		cdEntry := cdOff + int64(p)
		p = end
		if method != 0 || csize != usize {
			continue // compressed: no tensor inside, its bytes unchanged
		}
		if lho < 0 || lho+30 > size {
			return nil, fmt.Errorf("%w: local header at %d", errNotZip, lho)
		}
		if err := readAt(local, lho); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(local) != 0x04034b50 {
			return nil, fmt.Errorf("%w: no local header at %d", errNotZip, lho)
		}
		data := lho + 30 + int64(binary.LittleEndian.Uint16(local[26:])) + int64(binary.LittleEndian.Uint16(local[28:]))
		if data+csize > size {
			return nil, fmt.Errorf("%w: member at %d overruns the file", errNotZip, data)
		}
		m := zipMember{name: string(h[46 : 46+nameLen]), data: data, size: csize, crc: crc, crcAt: []int64{lho + 14, cdEntry + 16}}
		if flags&0x8 != 0 {
			// A data descriptor follows the data, with or without its
			// signature.
			d := make([]byte, 4)
			if data+csize+8 > size {
				return nil, fmt.Errorf("%w: data descriptor past the end", errNotZip)
			}
			if err := readAt(d, data+csize); err != nil {
				return nil, err
			}
			if binary.LittleEndian.Uint32(d) == 0x08074b50 {
				m.crcAt = append(m.crcAt, data+csize+4)
			} else {
				m.crcAt = append(m.crcAt, data+csize)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].data < out[j].data })
	for i := 1; i < len(out); i++ {
		if out[i].data < out[i-1].data+out[i-1].size {
			return nil, fmt.Errorf("%w: members overlap", errNotZip)
		}
	}
	return out, nil
}

// zipCRCs computes the CRC-32 of each member over the bytes a re-coding
// produces: feed it every chunk in file order (recodeOptions.observe).
type zipCRCs struct {
	members []zipMember
	crcs    []uint32
	next    int // first member not wholly seen
}

func newZipCRCs(members []zipMember) *zipCRCs {
	return &zipCRCs{members: members, crcs: make([]uint32, len(members))}
}

var zeroPage = make([]byte, 64<<10)

func (z *zipCRCs) observe(off int64, plain []byte, n int64) {
	end := off + n
	for i := z.next; i < len(z.members); i++ {
		m := z.members[i]
		if m.data >= end {
			break
		}
		lo, hi := max(off, m.data), min(end, m.data+m.size)
		if lo < hi {
			if plain != nil {
				z.crcs[i] = crc32.Update(z.crcs[i], crc32.IEEETable, plain[lo-off:hi-off])
			} else {
				for k := hi - lo; k > 0; {
					c := min(k, int64(len(zeroPage)))
					z.crcs[i] = crc32.Update(z.crcs[i], crc32.IEEETable, zeroPage[:c])
					k -= c
				}
			}
		}
		if m.data+m.size <= end && i == z.next {
			z.next++
		}
	}
}

// patches returns the CRC fields to rewrite: those of members whose
// bytes changed.
func (z *zipCRCs) patches() []bytePatch {
	var out []bytePatch
	for i, m := range z.members {
		if z.crcs[i] == m.crc {
			continue
		}
		b := binary.LittleEndian.AppendUint32(nil, z.crcs[i])
		for _, at := range m.crcAt {
			out = append(out, bytePatch{off: at, b: b})
		}
	}
	return out
}

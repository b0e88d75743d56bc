package encode

import "encoding/binary"

func le64(b []byte) uint64       { return binary.LittleEndian.Uint64(b) }
func putLE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func le32(b []byte) uint32       { return binary.LittleEndian.Uint32(b) }
func putLE32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func le16(b []byte) uint16       { return binary.LittleEndian.Uint16(b) }
func putLE16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

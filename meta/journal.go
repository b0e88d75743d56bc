package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"syscall"
)

// The journal holds logged updates (UpdateLogged) between synced commits.
// Each one is appended as a record of the bbolt changes it made, with
// write(2) and no fsync: a killed daemon leaves it in the page cache, so
// the next Open applies it; a power loss can lose the records since the
// last synced commit (or the last sync(1)), as a plain filesystem loses its
// journal's uncommitted tail. Records carry a sequence number, and the
// database records the last one it applied in the commit that applied it,
// so a record is applied once, in order, and a torn or stale tail is
// ignored.
//
// Record: u32 body length, u32 CRC-32C of the body (seeded, so that zeros
// are no record), then the body: u64 sequence number and the changes, each
// an op byte, a bucket byte (index in allBuckets), uvarint key length, key,
// and for a put uvarint value length and value.

const (
	opPut    = 1
	opDelete = 2

	journalHeader = 8
	// maxJournalRecord bounds one record, so that a corrupt length does
	// not ask for an absurd buffer.
	maxJournalRecord = 64 << 20
	journalSeed      = 0x636b7074 // "ckpt"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keyJournalSeq (bucketConfig) is the last journal record applied.
var keyJournalSeq = []byte("journal_seq")

// change is one bbolt write of a logged update.
type change struct {
	op     byte
	bucket byte
	key    []byte
	value  []byte // nil for a delete; a put of nil stores an empty value
}

func bucketIndex(name []byte) (byte, error) {
	for i, b := range allBuckets {
		if string(b) == string(name) {
			return byte(i), nil
		}
	}
	return 0, fmt.Errorf("bucket %q has no journal index", name)
}

// encodeRecord appends the record of changes with sequence number seq.
func encodeRecord(dst []byte, seq uint64, changes []change) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, journalHeader)...)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	for _, c := range changes {
		dst = append(dst, c.op, c.bucket)
		dst = binary.AppendUvarint(dst, uint64(len(c.key)))
		dst = append(dst, c.key...)
		if c.op == opPut {
			dst = binary.AppendUvarint(dst, uint64(len(c.value)))
			dst = append(dst, c.value...)
		}
	}
	body := dst[start+journalHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Update(journalSeed, castagnoli, body))
	return dst
}

// journalRecord is one decoded record.
type journalRecord struct {
	seq     uint64
	changes []change
}

// decodeJournal returns the records of data that follow applied in
// sequence: records numbered applied or less are skipped (a tail the last
// commit applied but whose truncation was lost), and decoding stops at the
// first record that is torn, corrupt or out of sequence. It never fails:
// what it cannot read is the part a crash lost.
func decodeJournal(data []byte, applied uint64) []journalRecord {
	var out []journalRecord
	next := applied + 1
	for len(data) >= journalHeader {
		n := binary.BigEndian.Uint32(data)
		sum := binary.BigEndian.Uint32(data[4:])
		if n < 8 || n > maxJournalRecord || int64(n) > int64(len(data)-journalHeader) {
			break
		}
		body := data[journalHeader : journalHeader+int(n)]
		if crc32.Update(journalSeed, castagnoli, body) != sum {
			break
		}
		data = data[journalHeader+int(n):]
		seq := binary.BigEndian.Uint64(body)
		if seq <= applied {
			continue
		}
		if seq != next {
			break
		}
		changes, ok := decodeChanges(body[8:])
		if !ok {
			break
		}
		out = append(out, journalRecord{seq: seq, changes: changes})
		next++
	}
	return out
}

func decodeChanges(b []byte) ([]change, bool) {
	var out []change
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, false
		}
		c := change{op: b[0], bucket: b[1]}
		b = b[2:]
		if (c.op != opPut && c.op != opDelete) || int(c.bucket) >= len(allBuckets) {
			return nil, false
		}
		var ok bool
		if c.key, b, ok = lengthPrefixed(b); !ok || len(c.key) == 0 {
			return nil, false
		}
		if c.op == opPut {
			if c.value, b, ok = lengthPrefixed(b); !ok {
				return nil, false
			}
		}
		out = append(out, c)
	}
	return out, true
}

func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// journal is the open journal file.
type journal struct {
	f    *os.File
	size int64
	buf  []byte
}

func openJournal(path string) (*journal, []byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open metadata journal: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read metadata journal %s: %w", path, err)
	}
	return &journal{f: f, size: int64(len(data))}, data, nil
}

// append writes one record at the end of the journal.
func (j *journal) append(seq uint64, changes []change) error {
	j.buf = encodeRecord(j.buf[:0], seq, changes)
	n, err := j.f.WriteAt(j.buf, j.size)
	if err == nil && n != len(j.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// A partial record is cut off, so that the next one follows the
		// last whole record (a torn tail would hide it from recovery).
		if terr := j.f.Truncate(j.size); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("write metadata journal: %w", err)
	}
	j.size += int64(n)
	if cap(j.buf) > 1<<20 {
		j.buf = nil
	}
	return nil
}

// reset empties the journal once a synced commit holds all it said. A
// failure is harmless for correctness (the records are numbered) but
// leaves the file growing, so it is reported.
func (j *journal) reset() error {
	if j.size == 0 {
		return nil
	}
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("empty metadata journal: %w", err)
	}
	j.size = 0
	return nil
}

func (j *journal) close() error { return j.f.Close() }

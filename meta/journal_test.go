package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openJournaled(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(filepath.Join(dir, "meta.db"), Options{Journal: filepath.Join(dir, "meta.journal"), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// killCopy copies the store's files while db is open, as a SIGKILL leaves
// them: what was written is there, what was not committed is not.
func killCopy(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for _, name := range []string{"meta.db", "meta.journal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func putInodes(t *testing.T, db *DB, logged bool, inos ...Ino) {
	t.Helper()
	update := db.Update
	if logged {
		update = db.UpdateLogged
	}
	for _, ino := range inos {
		err := update(func(tx *Tx) error {
			if err := tx.PutInode(&Inode{Ino: ino, Mode: 0o100644, Nlink: 1}); err != nil {
				return err
			}
			return tx.Link(RootIno, fmt.Sprintf("f%d", ino), ino)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func names(t *testing.T, db *DB) []string {
	t.Helper()
	var out []string
	err := db.View(func(tx *Tx) error {
		ents, err := tx.ReadDir(RootIno)
		for _, e := range ents {
			out = append(out, e.Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoggedUpdatesSurviveKill: logged updates are seen at once, are in
// the journal and not in a synced commit, and a process that opens the
// files a kill left finds them all.
func TestLoggedUpdatesSurviveKill(t *testing.T) {
	dir := t.TempDir()
	db := openJournaled(t, dir)
	defer db.Close()
	putInodes(t, db, false, 10)
	putInodes(t, db, true, 11, 12, 13)
	if got := names(t, db); fmt.Sprint(got) != "[f10 f11 f12 f13]" {
		t.Fatalf("views see %v", got)
	}
	if !db.dirty.Load() || db.journal.size == 0 {
		t.Fatal("logged updates were committed, not logged")
	}
	// A synced commit takes the logged changes along and empties the journal.
	copied := killCopy(t, dir)
	putInodes(t, db, false, 14)
	if db.dirty.Load() || db.journal.size != 0 {
		t.Fatalf("after a synced commit: dirty %v, journal %d bytes", db.dirty.Load(), db.journal.size)
	}
	putInodes(t, db, true, 15)
	copied2 := killCopy(t, dir)

	for _, c := range []struct {
		dir  string
		want string
	}{{copied, "[f10 f11 f12 f13]"}, {copied2, "[f10 f11 f12 f13 f14 f15]"}} {
		re := openJournaled(t, c.dir)
		if got := names(t, re); fmt.Sprint(got) != c.want {
			t.Errorf("after a kill: %v, want %s", got, c.want)
		}
		if err := re.Close(); err != nil {
			t.Fatal(err)
		}
		// Applied once: opening again changes nothing.
		re = openJournaled(t, c.dir)
		if got := names(t, re); fmt.Sprint(got) != c.want {
			t.Errorf("second open: %v, want %s", got, c.want)
		}
		re.Close()
	}
}

// TestJournalTornTail: a journal cut at any byte (a power loss before
// writeback) gives a prefix of the logged updates, whole records only;
// records already applied (an emptying that did not reach the disk) are
// not applied again.
func TestJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	db := openJournaled(t, dir)
	putInodes(t, db, false, 10)
	putInodes(t, db, true, 11, 12, 13)
	journal, err := os.ReadFile(filepath.Join(dir, "meta.journal"))
	if err != nil {
		t.Fatal(err)
	}
	base := killCopy(t, dir)
	db.Close()
	ends := []int{}
	for _, r := range splitRecords(journal) {
		ends = append(ends, r)
	}
	for cut := 0; cut <= len(journal); cut++ {
		d := t.TempDir()
		b, _ := os.ReadFile(filepath.Join(base, "meta.db"))
		os.WriteFile(filepath.Join(d, "meta.db"), b, 0o600)
		os.WriteFile(filepath.Join(d, "meta.journal"), journal[:cut], 0o600)
		whole := 0
		for _, e := range ends {
			if e <= cut {
				whole++
			}
		}
		want := []string{"f10", "f11", "f12", "f13"}[:1+whole]
		re := openJournaled(t, d)
		if got := names(t, re); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("journal cut at %d of %d: %v, want %v", cut, len(journal), got, want)
		}
		re.Close()
	}

	// Stale records before the new ones: the first open applied them and
	// emptied the journal; a journal that still shows them (and then the
	// next record) applies only the next.
	d := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(base, "meta.db"))
	os.WriteFile(filepath.Join(d, "meta.db"), b, 0o600)
	os.WriteFile(filepath.Join(d, "meta.journal"), journal, 0o600)
	re := openJournaled(t, d)
	// Remove f11 in a logged update: record 4.
	if err := re.UpdateLogged(func(tx *Tx) error { return tx.Unlink(RootIno, "f11") }); err != nil {
		t.Fatal(err)
	}
	next, _ := os.ReadFile(filepath.Join(d, "meta.journal"))
	stale := append(append([]byte{}, journal...), next...)
	d2 := killCopy(t, d)
	re.Close()
	os.WriteFile(filepath.Join(d2, "meta.journal"), stale, 0o600)
	re = openJournaled(t, d2)
	if got := fmt.Sprint(names(t, re)); got != "[f10 f12 f13]" {
		t.Fatalf("stale records and a new one: %v", got)
	}
	re.Close()
}

// splitRecords returns the end offset of each record of a journal.
func splitRecords(b []byte) []int {
	var ends []int
	off := 0
	for off+journalHeader <= len(b) {
		n := int(uint32(b[off])<<24 | uint32(b[off+1])<<16 | uint32(b[off+2])<<8 | uint32(b[off+3]))
		off += journalHeader + n
		ends = append(ends, off)
	}
	return ends
}

// TestLoggedRollbackKeepsEarlier: a failing update, logged or synced, undoes
// its own changes only; the logged ones before it stay, in views and after
// a kill.
func TestLoggedRollbackKeepsEarlier(t *testing.T) {
	dir := t.TempDir()
	db := openJournaled(t, dir)
	defer db.Close()
	putInodes(t, db, true, 11, 12)
	boom := errors.New("boom")
	undone := 0
	for _, update := range []func(func(*Tx) error) error{db.UpdateLogged, db.Update} {
		err := update(func(tx *Tx) error {
			tx.OnRollback(func() { undone++ })
			tx.OnCommit(func() { t.Error("a failed update's OnCommit ran") })
			tx.OnDurable(func() { t.Error("a failed update's OnDurable ran") })
			if err := tx.Link(RootIno, "half", 99); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("update: %v", err)
		}
	}
	if undone != 2 {
		t.Fatalf("OnRollback ran %d times, want 2", undone)
	}
	if got := fmt.Sprint(names(t, db)); got != "[f11 f12]" {
		t.Fatalf("after rollbacks: %v", got)
	}
	re := openJournaled(t, killCopy(t, dir))
	defer re.Close()
	if got := fmt.Sprint(names(t, re)); got != "[f11 f12]" {
		t.Fatalf("after rollbacks and a kill: %v", got)
	}
}

// TestLoggedHooks: a logged update's OnCommit runs when it is journaled,
// its OnDurable after the synced commit that holds it; RequireSync commits
// at once.
func TestLoggedHooks(t *testing.T) {
	dir := t.TempDir()
	db := openJournaled(t, dir)
	defer db.Close()
	var committed, durable []string
	logged := func(name string, sync bool) {
		err := db.UpdateLogged(func(tx *Tx) error {
			tx.OnCommit(func() { committed = append(committed, name) })
			tx.OnDurable(func() { durable = append(durable, name) })
			if sync {
				tx.RequireSync()
			}
			return tx.Link(RootIno, name, 5)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	logged("a", false)
	logged("b", false)
	if fmt.Sprint(committed) != "[a b]" || len(durable) != 0 {
		t.Fatalf("before the synced commit: committed %v, durable %v", committed, durable)
	}
	logged("c", true)
	if fmt.Sprint(durable) != "[a b c]" || db.dirty.Load() {
		t.Fatalf("after RequireSync: durable %v, dirty %v", durable, db.dirty.Load())
	}
	logged("d", false)
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(durable) != "[a b c d]" || fmt.Sprint(committed) != "[a b c d]" {
		t.Fatalf("after Sync: committed %v, durable %v", committed, durable)
	}
}

// TestFlusherCommits: logged changes reach a synced commit within the
// flush interval without any other update.
func TestFlusherCommits(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(filepath.Join(dir, "meta.db"), Options{Journal: filepath.Join(dir, "meta.journal"), FlushInterval: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	putInodes(t, db, true, 11)
	deadline := time.Now().Add(5 * time.Second)
	for db.dirty.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if db.dirty.Load() {
		t.Fatal("logged change not committed after 5 s with a 40 ms flush interval")
	}
	if fi, err := os.Stat(filepath.Join(dir, "meta.journal")); err != nil || fi.Size() != 0 {
		t.Fatalf("journal after the flush: %v %v", fi.Size(), err)
	}
}

// TestViewIsReadOnly: a view served from the open write transaction cannot
// change the store.
func TestViewIsReadOnly(t *testing.T) {
	db := openJournaled(t, t.TempDir())
	defer db.Close()
	putInodes(t, db, true, 11)
	err := db.View(func(tx *Tx) error {
		if tx.Writable() {
			t.Error("view is writable")
		}
		return tx.Link(RootIno, "x", 11)
	})
	if !errors.Is(err, errReadOnly) {
		t.Fatalf("write in a view: %v", err)
	}
	if got := fmt.Sprint(names(t, db)); got != "[f11]" {
		t.Fatalf("after the refused write: %v", got)
	}
}

// TestLoggedRandomAgainstModel: random logged, synced and failing updates,
// with kills (file copies) at random points, always reopen to the model.
func TestLoggedRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	dir := t.TempDir()
	db := openJournaled(t, dir)
	model := map[string]bool{}
	for step := 0; step < 300; step++ {
		name := fmt.Sprintf("n%d", rng.Intn(40))
		fail := rng.Intn(6) == 0
		update := db.UpdateLogged
		if rng.Intn(4) == 0 {
			update = db.Update
		}
		err := update(func(tx *Tx) error {
			var err error
			if model[name] {
				err = tx.Unlink(RootIno, name)
			} else {
				err = tx.Link(RootIno, name, Ino(step+10))
			}
			if err == nil && fail {
				err = errors.New("fail")
			}
			return err
		})
		if err == nil {
			model[name] = !model[name]
		} else if !fail {
			t.Fatal(err)
		}
		if rng.Intn(40) == 0 {
			re := openJournaled(t, killCopy(t, dir))
			checkModel(t, re, model, step)
			re.Close()
		}
	}
	db.Close()
	re := openJournaled(t, dir)
	defer re.Close()
	checkModel(t, re, model, -1)
}

func checkModel(t *testing.T, db *DB, model map[string]bool, step int) {
	t.Helper()
	got := map[string]bool{}
	for _, n := range names(t, db) {
		got[n] = true
	}
	for n, in := range model {
		if in != got[n] {
			t.Fatalf("step %d: %s present %v, model %v", step, n, got[n], in)
		}
	}
	for n := range got {
		if !model[n] {
			t.Fatalf("step %d: %s present, not in the model", step, n)
		}
	}
}

func FuzzDecodeJournal(f *testing.F) {
	f.Add(encodeRecord(nil, 1, []change{{op: opPut, bucket: 0, key: []byte("k"), value: []byte("v")}}), uint64(0))
	f.Add(encodeRecord(encodeRecord(nil, 1, nil), 2, []change{{op: opDelete, bucket: 2, key: []byte("key")}}), uint64(1))
	f.Add(make([]byte, 64), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, applied uint64) {
		// The data as the changes of a record whose frame is sound, so
		// that the change decoder is reached past the checksum.
		body := binary.BigEndian.AppendUint64(nil, applied+1)
		body = append(body, data...)
		framed := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		framed = binary.BigEndian.AppendUint32(framed, crc32.Update(journalSeed, castagnoli, body))
		if recs := decodeJournal(append(framed, body...), applied); len(recs) == 1 {
			for _, c := range recs[0].changes {
				if int(c.bucket) >= len(allBuckets) || len(c.key) == 0 {
					t.Fatalf("bad change accepted: %+v", c)
				}
			}
		}
		recs := decodeJournal(data, applied)
		var again []byte
		for i, r := range recs {
			if r.seq != applied+uint64(i)+1 {
				t.Fatalf("record %d has sequence %d after %d", i, r.seq, applied)
			}
			for _, c := range r.changes {
				if int(c.bucket) >= len(allBuckets) || len(c.key) == 0 {
					t.Fatalf("bad change accepted: %+v", c)
				}
			}
			again = encodeRecord(again, r.seq, r.changes)
		}
		// What decodes encodes to records that decode the same.
		if back := decodeJournal(again, applied); len(back) != len(recs) || !bytes.Equal(encodeAll(back), again) {
			t.Fatalf("re-encoding changed the records")
		}
	})
}

func encodeAll(recs []journalRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = encodeRecord(b, r.seq, r.changes)
	}
	return b
}

// TestLongRecordCommitsSynced: an update whose record recovery would
// refuse as too long is committed synced instead of logged.
func TestLongRecordCommitsSynced(t *testing.T) {
	db := openJournaled(t, t.TempDir())
	defer db.Close()
	big := make([]byte, maxJournalRecord/2+1)
	if err := db.UpdateLogged(func(tx *Tx) error { return tx.SetXattr(7, "user.big", big) }); err != nil {
		t.Fatal(err)
	}
	if db.dirty.Load() || db.journal.size != 0 {
		t.Fatalf("a %d-byte change was logged", len(big))
	}
}

// TestFreedSpaceWaitsForDurable: pages a logged update frees are handed out
// again only after the synced commit that holds the free.
func TestFreedSpaceWaitsForDurable(t *testing.T) {
	db := openJournaled(t, t.TempDir())
	defer db.Close()
	a, err := NewAllocator(db, DeviceSpace, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	exts, err := a.Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateLogged(func(tx *Tx) error { return a.Commit(tx, exts) }); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateLogged(func(tx *Tx) error { return a.Free(tx, exts) }); err != nil {
		t.Fatal(err)
	}
	if got := a.FreePages(); got != 0 {
		t.Fatalf("%d pages free before the free is durable", got)
	}
	if _, err := a.Reserve(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("reserve before the free is durable: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := a.FreePages(); got != 8 {
		t.Fatalf("%d pages free after the synced commit, want 8", got)
	}
}

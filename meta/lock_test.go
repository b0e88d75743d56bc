package meta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockProbe: Locked and WaitUnlocked see the lock of an open database
// and its release at Close; a missing file and a symlink count as free.
func TestLockProbe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	if Locked(path) {
		t.Fatal("a missing database is locked")
	}
	if err := WaitUnlocked(path, 0); err != nil {
		t.Fatalf("wait on a missing database: %v", err)
	}
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if !Locked(path) {
		t.Fatal("an open database is not locked")
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if Locked(link) {
		t.Fatal("the probe followed a symlink")
	}
	if err := WaitUnlocked(path, 60*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("wait on an open database: %v, want ErrLocked", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		db.Close()
	}()
	if err := WaitUnlocked(path, 10*time.Second); err != nil {
		t.Fatalf("wait for Close: %v", err)
	}
	if Locked(path) {
		t.Fatal("a closed database is locked")
	}
	// The probe let the lock go: the database opens at once.
	db, err = Open(path, Options{NoSync: true, LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("open after the probes: %v", err)
	}
	db.Close()
}

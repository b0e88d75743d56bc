package meta

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// A process that has the database at a path open holds an exclusive
// flock(2) on it (bbolt takes it at Open and lets it go at Close). These
// probe that lock without opening the database: they neither create the
// file nor wait for bbolt's timeout, so a command can tell at once whether
// a daemon serves a store, and wait until the daemon has saved it.

// pollUnlocked is how often WaitUnlocked probes the lock.
const pollUnlocked = 50 * time.Millisecond

// Locked reports whether a process holds the database at path open. A
// missing or unreadable file is not locked; a symlink is not followed
// (Open refuses it too).
func Locked(path string) bool {
	opened, err := tryLock(path)
	return opened && errors.Is(err, syscall.EWOULDBLOCK)
}

// WaitUnlocked waits until no process holds the database at path open (or
// the file is gone), or until limit has passed, and then fails with an
// error wrapping ErrLocked.
func WaitUnlocked(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if opened, err := tryLock(path); !opened || err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still held after %v: %w", path, limit, ErrLocked)
		}
		time.Sleep(pollUnlocked)
	}
}

// tryLock takes the lock a holder of the database has, without waiting,
// and lets it go at once. opened is false if the file cannot be opened;
// err is flock's error (EWOULDBLOCK: a holder has it).
func tryLock(path string) (opened bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true, err
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true, nil
}

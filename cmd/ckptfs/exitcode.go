package main

import (
	"errors"
	"fmt"
	"os"
)

// Exit statuses of ckptfs mount that a script (the Python API) tells apart
// without reading the message; every other failure exits 1. README.md
// lists them.
const (
	exitFailure    = 1
	exitNoFUSE     = 3 // /dev/fuse missing or not usable
	exitMountPoint = 4 // the mount point is missing, not a directory or busy
	exitStore      = 5 // the store is refused: in use, untrusted, inside the mount point
)

// exitError is an error with the status the process exits with.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// withExit gives err the exit status code (nil stays nil).
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return exitError{code: code, err: err}
}

// exitCode is the status the process exits with for err.
func exitCode(err error) int {
	var e exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailure
}

// fuseDevice is the kernel's FUSE device (tests replace it).
var fuseDevice = "/dev/fuse"

// checkFUSE checks /dev/fuse before anything is created, so that a missing
// module or a container without the device is said at once. Root opens it
// the way the mount will; another user's mount goes through fusermount3,
// which is setuid and opens it itself (the device may be 0600), so for
// them only its presence is checked.
func checkFUSE() error {
	fi, err := os.Stat(fuseDevice)
	if errors.Is(err, os.ErrNotExist) {
		return withExit(exitNoFUSE, fmt.Errorf("%s is missing (%w): load the fuse module, or give the container --device /dev/fuse", fuseDevice, err))
	}
	if err != nil {
		return withExit(exitNoFUSE, fmt.Errorf("%s: %w: FUSE is not usable here", fuseDevice, err))
	}
	if fi.Mode()&os.ModeCharDevice == 0 {
		return withExit(exitNoFUSE, fmt.Errorf("%s is not a character device: FUSE is not usable here", fuseDevice))
	}
	if os.Geteuid() != 0 {
		return nil
	}
	f, err := os.OpenFile(fuseDevice, os.O_RDWR, 0)
	if err != nil {
		return withExit(exitNoFUSE, fmt.Errorf("%s cannot be opened (%w): FUSE is not usable here", fuseDevice, err))
	}
	return f.Close()
}

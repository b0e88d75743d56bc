package nandsim

import "errors"

var (
	// ErrOutOfSpace: a write or Account reaches past the logical capacity,
	// or (never with a valid Config) no die has a page left.
	ErrOutOfSpace = errors.New("nandsim: out of space")
	// ErrOutOfRange: a read or trim names pages outside the logical capacity.
	ErrOutOfRange = errors.New("nandsim: page range out of bounds")
	// ErrBadLength: a buffer is not a positive multiple of the page size.
	ErrBadLength = errors.New("nandsim: length is not a positive multiple of the page size")
	// ErrInvalidConfig: Validate refused the configuration.
	ErrInvalidConfig = errors.New("nandsim: invalid config")
	// ErrNotFresh: Precondition needs a device nothing was written to.
	ErrNotFresh = errors.New("nandsim: device is not fresh")
	// ErrClosed: the device was closed.
	ErrClosed = errors.New("nandsim: device closed")
	// ErrInvariant: an internal consistency check failed (a bug).
	ErrInvariant = errors.New("nandsim: FTL invariant violated")
	// ErrBadState: a state file is truncated, corrupt, of another version
	// or of another geometry.
	ErrBadState = errors.New("nandsim: unusable state file")
)

package encode

import "errors"

// Sentinel errors of the codecs. Every error Decode returns wraps exactly one
// of them, so callers (the store, fsck) can tell a damaged chunk from a chunk
// given the wrong reference with errors.Is.
var (
	// ErrCorrupt: the encoded chunk is malformed or truncated.
	ErrCorrupt = errors.New("corrupt chunk")
	// ErrChecksum: the chunk decoded, but the result does not match the
	// CRC-32C recorded at encode time (damaged payload or wrong reference).
	ErrChecksum = errors.New("chunk checksum mismatch")
	// ErrRefMismatch: a delta needs a reference of exactly the plain length,
	// and none (or one of another length) was given.
	ErrRefMismatch = errors.New("reference mismatch")
	// ErrUnsupported: an unknown codec, dtype or format version.
	ErrUnsupported = errors.New("unsupported")
	// ErrTooLarge: a plain chunk longer than MaxPlain.
	ErrTooLarge = errors.New("chunk too large")
)

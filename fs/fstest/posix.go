// Package fstest holds what the in-process tests of fs and the mounted
// binary's tests (integration) share about the expected behaviour of a
// mount; the daemon imports none of it.
package fstest

// PosixExceptions lists the cases of go-fuse's POSIX conformance suite
// (posixtest) that ckptfs does not pass by design, with why. The in-process
// and the binary's test suites both skip exactly these.
var PosixExceptions = map[string]string{
	// POSIX record locks belong to the process: two descriptors of one
	// process never conflict, and the kernel's local lock handling (ckptfs
	// does not take over locking) gives exactly that, across processes too.
	// This case expects two descriptors of one process to conflict, which
	// only open-file-description locks do; go-fuse's loopback passes it by
	// forwarding to OFD locks of the backing file.
	"FcntlFlockLocksFile": "expects OFD semantics from classic POSIX locks",
}

// Package chain is the ckptfs store: it keeps each file as a version whose
// tensor chunks are deltas against the same chunks of an earlier version of
// the file's family, writes the encoded chunks through a simulated SSD,
// rebuilds exact bytes on read, frees what no version needs, and models what
// a plain filesystem would have written for the same operations (the shadow
// device), so every report compares the two from one run.
//
// The data flow, from DESIGN.md:
//
//	write → detector labels (encode/detect) → chunker → reference lookup →
//	codec (encode) → pack writer → device pages; commit = one bbolt txn
//	read  → chunk index → reconstruct (baseline + deltas, cached) → bytes
//
// Everything here is independent of FUSE; package fs adapts it to the kernel.
package chain

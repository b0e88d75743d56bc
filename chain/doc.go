// Package chain is the ckptfs store: it keeps each file as a version whose
// tensor chunks are deltas against the same chunks of an earlier version of
// the file's family, hands the encoded chunks to a storage backend, rebuilds
// exact bytes on read, frees what no version needs, and reports and checks
// the store. The jobs around it have packages of their own below chain/: the
// tree of names (namespace), coding decisions (policy), where bytes live
// (storage), wear accounting (wear), decoded-chunk memory (plaincache) and
// the offline tools (replay, analyze). docs/ARCHITECTURE.md maps them.
//
// The data flow:
//
//	write → detector labels (encode/detect) → chunker → reference (policy) →
//	codec (encode) → pack → storage.Backend; commit = one bbolt transaction
//	read  → chunk index → reconstruct (baseline + deltas, plaincache) → bytes
//
// Everything here is independent of FUSE; package fs adapts it to the kernel.
package chain

// Package fs adapts a store to the kernel through go-fuse: nodes and file
// handles with POSIX semantics, and nothing about bytes. It depends on the
// roles it declares in store.go (Names, Xattrs, Contents, Space,
// WriteBack: the methods it calls, which *chain.Store and its namespace
// have), not on the concrete store nor on the metadata package; package
// chain supplies only the types that cross the interfaces. Files are
// split by operation (node.go, node_dir_ops.go, node_open_create.go,
// node_xattr.go, file.go); per-inode state shared by open handles lives in
// openfiles.go, and where the save of its staged content is (changed,
// queued, settling, committing, kept for a later try) in that state's
// save.State (fs/save); the staging file of a save in stagingfile.go, its
// commit in the background in writeback.go; the read-only control
// directory .ckptfs in control.go.
// Its tests mount it in the test process over a throw-away store
// (mount_test.go) and work through the mount.
//
// Visibility of uncommitted writes: while a file has writers, every reader
// of it (through any handle) sees the bytes written so far, as on any
// POSIX filesystem. The content becomes committed, and survives a crash, at
// close (flush) or fsync of a handle; until then a crash leaves the
// previously committed content.
package fs

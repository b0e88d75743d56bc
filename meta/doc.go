// Package meta is a store's metadata: one bbolt database (meta.db) and its
// journal (meta.journal), behind typed records. It holds the namespace
// (inodes, directory entries, extended attributes, orphans: files unlinked
// while open), the versions of each file's content with their segments,
// chunks and pack extents, the families that group a run's saves, the free
// lists of the device and the shadow device (Allocator: free extents in
// memory mirror the persisted ones), counters and the store's config
// (device geometry and where its size came from, layout, policy, backend).
// docs/STORE.md describes every bucket and record.
//
// Changes run in transactions (Tx). A synced update commits to meta.db at
// once; a logged update (UpdateLogged) is appended to the journal and
// reaches meta.db in a synced commit grouping the changes of about a
// second, so that a killed daemon loses nothing it logged and the device
// pages of the commits are counted. In-memory state follows the database
// through OnCommit, OnDurable and OnRollback. meta knows nothing of FUSE,
// the codecs or the simulated SSD: it counts the pages its commits write
// through a callback (SetAccount).
package meta

// Package nandsim simulates a NAND flash SSD closely enough to count what a
// storage design costs in flash wear: every page program, GC copy and block
// erase, and the time they take.
//
// The device (SSD) keeps page content in a Backing (memory, a sparse file,
// or nowhere) indexed by logical page, and runs every write through a
// page-mapped FTL that decides where the page would go physically: striped
// round-robin over dies, one host and one GC write frontier per die, GC per
// die when free blocks fall under a reserve, greedy or cost-benefit victims.
// The FTL state can be saved and restored; losing it loses statistics, never
// data. Defaults are Table 4 of the delta-snapshot paper; docs/NANDSIM.md
// describes the model.
//
// The package is pure: stdlib, logrus and x/sys/unix; it imports nothing of
// ckptfs.
package nandsim

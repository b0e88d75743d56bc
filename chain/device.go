package chain

// Device is the simulated SSD the store writes through, addressed by logical
// page. nandsim.SSD satisfies it; tests may use anything that does.
type Device interface {
	PageSize() int
	LogicalPages() int64
	WritePages(lpn int64, data []byte) error
	ReadPages(lpn int64, buf []byte) error
	// Account records writes of n pages at lpn without storing content: the
	// metadata estimate and every write of the shadow device go this way.
	Account(lpn, n int64) error
	Trim(lpn, n int64) error
	// SyncContent makes written pages durable; Sync also saves the
	// simulator's state (its statistics), which is much slower.
	SyncContent() error
	Sync() error
}

package nandsim

import (
	"errors"
	"fmt"
	"math"
)

// Policy chooses the GC victim among the closed blocks of a die.
type Policy string

const (
	// Greedy takes the block with the fewest valid pages (cheapest to clean now).
	Greedy Policy = "greedy"
	// CostBenefit takes the block maximising (1-u)/(2u) x age (Rosenblum and
	// Ousterhout's LFS cleaner), so cold, mostly-valid blocks are cleaned too.
	CostBenefit Policy = "cost-benefit"
)

// minSpareBlocksPerDie is the least over-provisioning a die may have. One
// free block is always kept for GC to copy into; a second lets the host
// frontier move on while GC works; a third guarantees that when every die
// refuses host writes the live data would exceed the logical capacity, which
// cannot happen, so a write inside the logical capacity never fails for space.
const minSpareBlocksPerDie = 3

// Config is the geometry, timing and GC policy of a simulated SSD.
// A die (one chip of one channel) is the unit of parallelism and of
// space management: it has its own free blocks, write frontiers and GC.
type Config struct {
	Channels        int `json:"channels"`
	ChipsPerChannel int `json:"chips_per_channel"`
	BlocksPerChip   int `json:"blocks_per_chip"`
	PagesPerBlock   int `json:"pages_per_block"`
	PageSize        int `json:"page_size"`

	// Latencies in milliseconds. TransferMsPerByte is paid for every byte
	// that crosses a channel bus (host reads and writes, not GC copyback).
	ReadMs            float64 `json:"read_ms"`
	ProgramMs         float64 `json:"program_ms"`
	EraseMs           float64 `json:"erase_ms"`
	TransferMsPerByte float64 `json:"transfer_ms_per_byte"`
	// SharedBus serialises every host transfer on one bus (only one chip
	// talks to the host at a time) instead of one bus per channel. Off by
	// default: the paper's Table 9 restore times match per-channel buses.
	SharedBus bool `json:"shared_bus"`

	// OverProvisioning is the share of physical pages hidden from the host:
	// logical pages = floor(physical x (1 - OverProvisioning)).
	OverProvisioning float64 `json:"over_provisioning"`
	// GCReserve: GC starts on a die when taking a block for host writes
	// would leave fewer than GCReserve x blocks-per-die free blocks.
	GCReserve float64 `json:"gc_reserve"`
	// GCHighWater: once started, GC cleans until this share of the die's
	// blocks is free (at least one block above the reserve).
	GCHighWater float64 `json:"gc_high_water"`
	Policy      Policy  `json:"policy"`
}

// SmallConfig is the default device cut to 4 channels of 64 blocks (64 MiB
// of flash): what tests open, so that a store costs little memory and its
// GC is reached with little data.
func SmallConfig() Config {
	c := DefaultConfig()
	c.Channels, c.BlocksPerChip = 4, 64
	return c
}

// DefaultConfig is the paper's Table 4 device (DiskSim SSD extension):
// 8 channels x 1 chip x 16384 blocks x 64 pages of 4 KiB = 32 GiB physical,
// 15% over-provisioning, GC when free blocks fall under 5%.
func DefaultConfig() Config {
	return Config{
		Channels:          8,
		ChipsPerChannel:   1,
		BlocksPerChip:     16384,
		PagesPerBlock:     64,
		PageSize:          4096,
		ReadMs:            0.025,
		ProgramMs:         0.2,
		EraseMs:           1.5,
		TransferMsPerByte: 0.000025,
		OverProvisioning:  0.15,
		GCReserve:         0.05,
		GCHighWater:       0.055,
		Policy:            Greedy,
	}
}

// ConfigForSize returns base with as many blocks per chip as make bytes of
// physical flash (rounded down), its channels, chips, pages and timing
// kept: a device the size a user asks for that still behaves as base
// does. The error is Validate's, for a size too small to run (or a base
// that cannot).
func ConfigForSize(base Config, bytes int64) (Config, error) {
	perBlock := int64(base.Dies()) * int64(base.PagesPerBlock) * int64(base.PageSize)
	if perBlock <= 0 {
		return base, base.Validate()
	}
	base.BlocksPerChip = int(bytes / perBlock)
	return base, base.Validate()
}

// Dies is the number of independently operating chips.
func (c Config) Dies() int { return c.Channels * c.ChipsPerChannel }

// TotalBlocks is the number of erase blocks on the device.
func (c Config) TotalBlocks() int64 { return int64(c.Dies()) * int64(c.BlocksPerChip) }

// PhysicalPages is the raw page count, spare area included.
func (c Config) PhysicalPages() int64 { return c.TotalBlocks() * int64(c.PagesPerBlock) }

// LogicalPages is what the host may address.
func (c Config) LogicalPages() int64 {
	// The epsilon keeps 0.85 x 100 from flooring to 84.
	return int64(math.Floor(float64(c.PhysicalPages())*(1-c.OverProvisioning) + 1e-6))
}

// lowBlocks and highBlocks are the GC watermarks of one die, in blocks.
// One free block is always held back for GC, hence the minimums.
func (c Config) lowBlocks() int32 {
	return max(int32(math.Floor(c.GCReserve*float64(c.BlocksPerChip)+1e-9)), 1)
}

func (c Config) highBlocks() int32 {
	return max(int32(math.Floor(c.GCHighWater*float64(c.BlocksPerChip)+1e-9)), c.lowBlocks()+1)
}

// Validate refuses configurations the FTL cannot run, saying which field is wrong.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, f := range []struct {
		name string
		v    int
	}{
		{"channels", c.Channels}, {"chips per channel", c.ChipsPerChannel},
		{"blocks per chip", c.BlocksPerChip}, {"pages per block", c.PagesPerBlock},
		{"page size", c.PageSize},
	} {
		if f.v <= 0 {
			bad("%s must be positive, got %d", f.name, f.v)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	if c.PageSize > 1<<20 {
		bad("page size %d exceeds 1 MiB", c.PageSize)
	}
	if c.PagesPerBlock > 1<<16 {
		bad("pages per block %d exceeds 65536", c.PagesPerBlock)
	}
	if c.PhysicalPages() >= math.MaxInt32 {
		bad("%d physical pages exceed the 32-bit page map (max %d)", c.PhysicalPages(), math.MaxInt32-1)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"read latency", c.ReadMs}, {"program latency", c.ProgramMs},
		{"erase latency", c.EraseMs}, {"transfer latency per byte", c.TransferMsPerByte},
	} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			bad("%s must be a finite non-negative number of ms, got %v", f.name, f.v)
		}
	}
	if !(c.OverProvisioning > 0 && c.OverProvisioning < 1) {
		bad("over-provisioning must be in (0, 1), got %.4g", c.OverProvisioning)
	} else if c.LogicalPages() <= 0 {
		bad("over-provisioning %.4g leaves no logical page", c.OverProvisioning)
	} else if spare := c.sparePagesPerDie(); spare < float64(minSpareBlocksPerDie*c.PagesPerBlock) {
		bad("over-provisioning %.4g leaves %.1f spare blocks per die, need at least %d (one for GC, one for the host, one of slack)",
			c.OverProvisioning, spare/float64(c.PagesPerBlock), minSpareBlocksPerDie)
	}
	reserveOK := c.GCReserve >= 0 && c.GCReserve < c.OverProvisioning && !math.IsInf(c.GCReserve, 0)
	if !reserveOK {
		bad("GC reserve %.4g must be in [0, over-provisioning %.4g)", c.GCReserve, c.OverProvisioning)
	} else if !(c.GCHighWater >= c.GCReserve) || c.GCHighWater >= c.OverProvisioning {
		bad("GC high watermark %.4g must be in [reserve %.4g, over-provisioning %.4g)", c.GCHighWater, c.GCReserve, c.OverProvisioning)
	} else if len(errs) == 0 {
		room := c.sparePagesPerDie()/float64(c.PagesPerBlock) - float64(c.highBlocks())
		if room < 2 {
			bad("GC high watermark of %d free blocks per die leaves %.1f spare blocks for invalid pages, need at least 2; lower the reserve or raise over-provisioning",
				c.highBlocks(), room)
		}
	}
	switch c.Policy {
	case Greedy, CostBenefit:
	default:
		bad("unknown GC policy %q (want %q or %q)", c.Policy, Greedy, CostBenefit)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func (c Config) sparePagesPerDie() float64 {
	return float64(c.PhysicalPages()-c.LogicalPages()) / float64(c.Dies())
}

// fingerprint identifies the geometry a saved page map belongs to. Timing
// and GC policy are left out: a map stays valid when they change.
func (c Config) fingerprint() uint64 {
	h := uint64(14695981039346656037)
	for _, v := range []int64{int64(c.Channels), int64(c.ChipsPerChannel), int64(c.BlocksPerChip),
		int64(c.PagesPerBlock), int64(c.PageSize), c.LogicalPages()} {
		for i := 0; i < 8; i++ {
			h ^= uint64(v>>(8*i)) & 0xff
			h *= 1099511628211
		}
	}
	return h
}

package nandsim

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultConfigIsTable4(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if c.Channels != 8 || c.ChipsPerChannel != 1 || c.BlocksPerChip != 16384 || c.PagesPerBlock != 64 || c.PageSize != 4096 {
		t.Errorf("geometry %+v is not Table 4", c)
	}
	if c.ReadMs != 0.025 || c.ProgramMs != 0.2 || c.EraseMs != 1.5 || c.TransferMsPerByte != 0.000025 {
		t.Errorf("latencies %+v are not Table 4", c)
	}
	if c.TotalBlocks() != 131072 || c.PhysicalPages() != 8388608 {
		t.Errorf("%d blocks, %d pages; Table 8 has 131072 blocks", c.TotalBlocks(), c.PhysicalPages())
	}
	// floor(8388608 x 0.85) = floor(7130316.8)
	if got := c.LogicalPages(); got != 7130316 {
		t.Errorf("logical pages %d, want 7130316", got)
	}
	if c.lowBlocks() != 819 || c.highBlocks() != 901 {
		t.Errorf("watermarks %d/%d blocks per die, want 819/901 (5%% and 5.5%% of 16384)", c.lowBlocks(), c.highBlocks())
	}
}

func TestLogicalPagesRoundsDownWithoutFloatSlip(t *testing.T) {
	c := DefaultConfig()
	c.Channels, c.BlocksPerChip, c.PagesPerBlock = 1, 20, 5 // 100 pages
	if got := c.LogicalPages(); got != 85 {
		t.Errorf("100 pages at 15%% OP: %d logical, want 85", got)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"zero channels", func(c *Config) { c.Channels = 0 }, "channels must be positive"},
		{"zero pages", func(c *Config) { c.PagesPerBlock = 0 }, "pages per block must be positive"},
		{"negative page size", func(c *Config) { c.PageSize = -4096 }, "page size must be positive"},
		{"no OP", func(c *Config) { c.OverProvisioning = 0 }, "over-provisioning must be in (0, 1)"},
		{"all OP", func(c *Config) { c.OverProvisioning = 1 }, "over-provisioning must be in (0, 1)"},
		{"OP below a spare block per die", func(c *Config) {
			c.BlocksPerChip, c.OverProvisioning, c.GCReserve, c.GCHighWater = 64, 0.02, 0, 0
		}, "spare blocks per die"},
		{"reserve equal to OP", func(c *Config) { c.GCReserve, c.GCHighWater = 0.15, 0.15 }, "GC reserve 0.15 must be in [0, over-provisioning"},
		{"negative reserve", func(c *Config) { c.GCReserve = -0.01 }, "GC reserve"},
		{"high water below reserve", func(c *Config) { c.GCHighWater = 0.01 }, "high watermark 0.01"},
		{"reserve leaves no room", func(c *Config) { c.BlocksPerChip, c.GCReserve, c.GCHighWater = 256, 0.14, 0.149 }, "spare blocks for invalid pages"},
		{"unknown policy", func(c *Config) { c.Policy = "lru" }, `unknown GC policy "lru"`},
		{"negative latency", func(c *Config) { c.ProgramMs = -1 }, "program latency"},
		{"too many pages", func(c *Config) { c.BlocksPerChip = 1 << 22 }, "32-bit page map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("accepted %+v", c)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			if _, err := Open(c, Options{}); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Open accepted the config: %v", err)
			}
		})
	}
}

func TestFingerprintCoversGeometryNotTiming(t *testing.T) {
	a := DefaultConfig()
	b := a
	b.ProgramMs, b.Policy, b.GCReserve = 0.3, CostBenefit, 0.02
	if a.fingerprint() != b.fingerprint() {
		t.Error("timing or policy changed the fingerprint")
	}
	b = a
	b.BlocksPerChip--
	if a.fingerprint() == b.fingerprint() {
		t.Error("geometry change kept the fingerprint")
	}
	b = a
	b.OverProvisioning = 0.2
	if a.fingerprint() == b.fingerprint() {
		t.Error("logical capacity change kept the fingerprint")
	}
}

// TestConfigForSize: the blocks per chip follow the size, rounded down;
// the rest of the geometry is the base's; too small a device is refused.
func TestConfigForSize(t *testing.T) {
	base := DefaultConfig()
	cfg, err := ConfigForSize(base, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.PhysicalPages() * int64(cfg.PageSize); got != 64<<20 {
		t.Fatalf("64 MiB device has %d bytes", got)
	}
	want := base
	want.BlocksPerChip = cfg.BlocksPerChip
	if cfg != want {
		t.Fatalf("ConfigForSize changed more than the blocks per chip:\n%+v\n%+v", cfg, base)
	}
	// A block of every die is 8 x 64 x 4 KiB = 2 MiB: 65 MiB rounds down.
	if odd, err := ConfigForSize(base, 65<<20); err != nil || odd.BlocksPerChip != cfg.BlocksPerChip {
		t.Fatalf("65 MiB: %d blocks per chip, %v; want %d", odd.BlocksPerChip, err, cfg.BlocksPerChip)
	}
	if _, err := ConfigForSize(base, 1<<20); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("1 MiB device: %v, want ErrInvalidConfig", err)
	}
	broken := base
	broken.Channels = 0
	if _, err := ConfigForSize(broken, 64<<20); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a base without channels: %v, want ErrInvalidConfig", err)
	}
}

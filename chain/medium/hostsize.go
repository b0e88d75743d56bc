package medium

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ckptfs/ckptfs/nandsim"
	"golang.org/x/sys/unix"
)

// MinHostSizedDevice is the smallest device HostSizedDevice makes, however
// little the host has free: below it the paper's geometry has too few
// blocks per chip for its GC reserve.
const MinHostSizedDevice = 128 << 20

// HostSizedDevice returns the simulated SSD of a new store in dir: the
// store's geometry with as much usable (logical) space as the filesystem
// that will hold dir has free, so that a store holds what a plain
// directory there would. The device's page maps cost memory for what is
// stored, not for this capacity (nandsim's sparse maps); a device is capped
// at what its 32-bit page maps address (8 TiB of flash). The second result
// says where the size came from, for the store's report.
func HostSizedDevice(dir string) (nandsim.Config, string, error) {
	base := StoreDevice()
	at, err := existingAncestor(dir)
	if err != nil {
		return base, "", err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(at, &st); err != nil {
		return base, "", fmt.Errorf("size the device from %s: %w", at, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	cfg, note, err := deviceForFree(base, free)
	if err != nil {
		return base, "", fmt.Errorf("size the device from %s: %w", at, err)
	}
	return cfg, fmt.Sprintf("sized from the free space of the filesystem under %s (%s when the store was made)%s",
		at, HumanBytes(free), note), nil
}

// deviceForFree is base with as much logical space as free bytes, within
// the sizes the simulator runs; note says when the size was clamped.
func deviceForFree(base nandsim.Config, free int64) (cfg nandsim.Config, note string, err error) {
	physical := int64(float64(free) / (1 - base.OverProvisioning))
	maxPhysical := int64(math.MaxInt32-1) * int64(base.PageSize)
	switch {
	case physical > maxPhysical:
		physical = maxPhysical
		note = fmt.Sprintf(", capped at the simulator's %s of flash", HumanBytes(maxPhysical))
	case physical < MinHostSizedDevice:
		physical = MinHostSizedDevice
		note = fmt.Sprintf(", raised to the smallest device, %s of flash", HumanBytes(physical))
	}
	cfg, err = nandsim.ConfigForSize(base, physical)
	return cfg, note, err
}

// existingAncestor is dir, or its nearest ancestor that exists: a new
// store's directory is made only when the store is opened.
func existingAncestor(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(abs); err == nil {
			return abs, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return abs, nil
		}
		abs = parent
	}
}

// HumanBytes writes n in binary units, one decimal ("68.1 GiB").
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, exp := float64(n), 0
	for v >= unit && exp < 5 {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp-1])
}

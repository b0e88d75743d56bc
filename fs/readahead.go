package fs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadAheadKiB is the kernel read-ahead a mount asks for. A FUSE mount
// starts at the kernel's default (128 KiB) and the INIT reply can only
// lower it, so each cold sequential read waits for one 128 KiB request to
// be served before the next is sent. A larger window keeps several 1 MiB
// requests in flight, which the daemon serves in parallel while it decodes
// ahead (chain.Reader). The pages are the page cache's, reclaimable.
const ReadAheadKiB = 8 << 10

// bdiReadAheadPath is the sysfs file holding the read-ahead of the backing
// device of the filesystem mounted at mountpoint.
func bdiReadAheadPath(mountpoint string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", mountpoint, err)
	}
	dev := uint64(st.Dev)
	return fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev)), nil
}

// SetReadAhead sets the kernel read-ahead of the mount at mountpoint to
// kib KiB (only root may) and returns the value the kernel then reports.
// Files opened afterwards use it.
func SetReadAhead(mountpoint string, kib int) (int, error) {
	p, err := bdiReadAheadPath(mountpoint)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(p, []byte(strconv.Itoa(kib)), 0o644); err != nil {
		return 0, fmt.Errorf("set read-ahead of %s: %w", mountpoint, err)
	}
	return ReadAhead(mountpoint)
}

// ReadAhead reports the kernel read-ahead of the mount at mountpoint, KiB.
func ReadAhead(mountpoint string) (int, error) {
	p, err := bdiReadAheadPath(mountpoint)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("read-ahead of %s: %w", mountpoint, err)
	}
	kib, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("read-ahead of %s: %q: %w", mountpoint, b, err)
	}
	return kib, nil
}

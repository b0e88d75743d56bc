package integration

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A new store holds what the filesystem under it has free, as a plain
// directory there would: df on the mount says so, and the report says
// where the size came from. The paper's device is a flag away.
func TestCapacityFromHost(t *testing.T) {
	base := t.TempDir()
	var host unix.Statfs_t
	if err := unix.Statfs(base, &host); err != nil {
		t.Fatal(err)
	}
	free := int64(host.Bavail) * int64(host.Bsize)
	if free < 1<<30 {
		t.Skipf("the filesystem under %s has %d bytes free: too little to tell its size from the smallest device", base, free)
	}
	m := newMount(t)
	var st unix.Statfs_t
	if err := unix.Statfs(m.dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Blocks) * int64(st.Bsize)
	t.Logf("host has %d MiB free; the mount's df size is %d MiB", free>>20, size>>20)
	// The data area is the device's logical space less its metadata region
	// (1/256): within 2% of what the host had free.
	if size > free || size < free-free/50 {
		t.Errorf("df size %d, want the host's free %d (within 2%%)", size, free)
	}
	r := m.stats()
	if r.Capacity.UsableBytes != size || !strings.Contains(r.Capacity.Source, "free space of the filesystem under") ||
		r.Capacity.FlashBytes <= size {
		t.Errorf("report capacity %+v, df size %d", r.Capacity, size)
	}
	if out := run(t, "stats", m.dir); !strings.Contains(out, "capacity: ") || !strings.Contains(out, "sized from the free space") {
		t.Errorf("stats does not state the capacity and its source:\n%s", out)
	}

	p := newMount(t, "--device-size", "paper")
	if err := unix.Statfs(p.dir, &st); err != nil {
		t.Fatal(err)
	}
	paper := int64(32<<30) * 85 / 100
	if size := int64(st.Blocks) * int64(st.Bsize); size > paper || size < paper-paper/200-1 {
		t.Errorf("--device-size paper: df size %d, want 85%% of 32 GiB less the metadata region", size)
	}
	if r := p.stats(); !strings.Contains(r.Capacity.Source, "paper") {
		t.Errorf("--device-size paper: source %q", r.Capacity.Source)
	}
	// A store keeps its device: remounted without the flag, it is still
	// the paper's.
	p.restart()
	if r := p.stats(); !strings.Contains(r.Capacity.Source, "paper") || r.Capacity.FlashBytes != 32<<30 {
		t.Errorf("remounted without --device-size: %+v", r.Capacity)
	}
}

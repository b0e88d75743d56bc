package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// warmMemory writes to most of the machine's free memory once and gives it
// back, before anything is timed. On a virtual machine, memory the guest
// has never touched is backed by the host only at its first write, which
// here costs about 2.3 ms per MiB (the first pass over 14 GiB took 32 s,
// the next 6 s): a comparison must not charge that to whichever side
// happened to allocate never-touched pages. A real machine's memory is
// backed from boot. (It does not keep writes steady: this guest runs
// with free page reporting, so memory it frees goes back to the host after
// about 2 s and costs the next writer a host fault per page again; a save
// right after the delete of the previous checkpoint reuses the freed page
// cache and is fast, one after a pause is not. Section 10 measures both.) It
// touches up to 60% of MemAvailable, at most 16 GiB, and returns how much
// and how long it took.
func warmMemory() (mib int64, seconds float64) {
	avail := memAvailable()
	n := min(avail/10*6, 16<<30)
	if n < 64<<20 {
		return 0, 0
	}
	t0 := time.Now()
	const chunk = 1 << 30
	for done := int64(0); done < n; done += chunk {
		size := int(min(chunk, n-done))
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			break
		}
		for i := 0; i < size; i += 4096 {
			b[i] = 1
		}
		unix.Munmap(b)
	}
	return n >> 20, time.Since(t0).Seconds()
}

// memAvailable is /proc/meminfo's MemAvailable in bytes (0 if unknown).
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

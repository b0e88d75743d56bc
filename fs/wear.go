package fs

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"golang.org/x/sys/unix"
)

// What staging costs the SSD. A staging file lives in the host's page
// cache; the host writes its pages to the device only when asked (fsync,
// sync) or when they have been dirty longer than the dirty expiry (30 s by
// default) or the dirty bytes pass the background limit. A file encoded
// and deleted before any of these costs the device nothing, as a
// short-lived file costs a plain filesystem nothing. docs/NANDSIM.md.

// maxFileSize is the largest file the store keeps.
const maxFileSize = chain.MaxFileSize

// hostWriteBack reads the host's dirty expiry and background limit
// (/proc/sys/vm), with the kernel's defaults where they cannot be read.
func hostWriteBack() (expire time.Duration, limit int64) {
	expire = 30 * time.Second
	if cs, ok := readSysctl("dirty_expire_centisecs"); ok && cs > 0 {
		expire = time.Duration(cs) * 10 * time.Millisecond
	}
	if b, ok := readSysctl("dirty_background_bytes"); ok && b > 0 {
		return expire, b
	}
	ratio := int64(10)
	if r, ok := readSysctl("dirty_background_ratio"); ok && r > 0 {
		ratio = r
	}
	return expire, chain.PhysicalMemory() * ratio / 100
}

func readSysctl(name string) (int64, bool) {
	b, err := os.ReadFile("/proc/sys/vm/" + name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// chargeStaged charges the device for sf's content, written back by the
// host (fsync, expiry, limit): once per content.
func (f *FS) chargeStaged(sf *stagedFile) {
	if sf.charged {
		return
	}
	sf.charged = true
	size := int64(0)
	_ = sf.use(func(file *os.File) error {
		var st unix.Stat_t
		if err := unix.Fstat(int(file.Fd()), &st); err != nil {
			return err
		}
		size = st.Blocks * 512 // the pages written, not the holes
		return nil
	})
	f.store.ChargeStaged(size)
}

// truncateBacking keeps a lingering backing file (stagingfile.go) equal to the
// committed content after a truncate(2) of the committed file.
func (f *FS) truncateBacking(ino chain.Ino, size int64) {
	f.backingMu.Lock()
	b := f.backings[ino]
	f.backingMu.Unlock()
	if b != nil {
		_ = b.sf.use(func(file *os.File) error { return file.Truncate(size) })
	}
}

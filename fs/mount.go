package fs

import (
	"fmt"
	"os"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
)

// MountOptions are the user-settable mount options.
type MountOptions struct {
	AllowOther bool // let other users in (needs user_allow_other for non-root)
	Debug      bool // log every FUSE request
	ReadOnly   bool // mount read-only (a replica of a remote store)
}

// Mount serves f at mountpoint and returns once the kernel has the mount.
// Root mounts with mount(2) directly; others go through fusermount3.
func Mount(mountpoint string, f *FS, opts MountOptions) (*fuse.Server, error) {
	sec := time.Second
	o := &gofs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NullPermissions: true}
	o.MaxWrite = 1 << 20
	o.MaxReadAhead = 1 << 20
	// Reads answer with bytes in memory, never a file descriptor: trying
	// to splice them costs a pipe round trip per read, and fails (and
	// logs) for 1 MiB reads, which outgrow the largest pipe.
	o.DisableSplice = true
	o.FsName = "ckptfs"
	o.Name = "ckptfs"
	o.Options = []string{"default_permissions"}
	if opts.ReadOnly {
		o.Options = append(o.Options, "ro")
	}
	o.DirectMount = os.Geteuid() == 0
	o.AllowOther = opts.AllowOther
	o.Debug = opts.Debug
	server, err := gofs.Mount(mountpoint, f.Root(), o)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	// MaxReadAhead above cannot raise the kernel's 128 KiB; the backing
	// device's setting can, for root.
	if o.DirectMount {
		if kib, err := SetReadAhead(mountpoint, ReadAheadKiB); err != nil {
			logrus.WithError(err).Warn("kernel read-ahead left at its default")
		} else {
			logrus.Debugf("kernel read-ahead of %s: %d KiB", mountpoint, kib)
		}
	}
	return server, nil
}

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
	// NoPassthrough has the daemon write staging files even where the
	// kernel could serve them (FUSE passthrough).
	NoPassthrough bool
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
	// O_TRUNC comes with the open, so a rewrite's staging file starts
	// empty instead of holding a copy of the content it replaces; and the
	// daemon clears setuid bits itself (killPrivileges), so the kernel does
	// not ask for security.capability before each write.
	o.ExtraCapabilities = fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_HANDLE_KILLPRIV_V2
	o.DirectMount = os.Geteuid() == 0
	o.AllowOther = opts.AllowOther
	o.Debug = opts.Debug
	server, err := gofs.Mount(mountpoint, f.Root(), o)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if !opts.ReadOnly {
		f.passthrough.Store(!opts.NoPassthrough && passthroughWorks(server, f))
		logrus.Infof("saves: %s staging files in %s", f.Mode(), stagingPath(f))
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

// passthroughWorks reports whether the kernel serves handles from backing
// files for this mount: it offered FUSE passthrough, and it accepts a
// staging file as one (CAP_SYS_ADMIN; a staging directory the kernel can
// stack on).
func passthroughWorks(server *fuse.Server, f *FS) bool {
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		logrus.Debug("kernel without FUSE passthrough")
		return false
	}
	dir, err := f.stagingDir()
	if err != nil {
		return false
	}
	probe, err := dir.Create(0)
	if err != nil {
		return false
	}
	defer probe.Remove()
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(probe.Fd())})
	if errno != 0 {
		logrus.Debugf("FUSE passthrough refused: %v", errno)
		return false
	}
	server.UnregisterBackingFd(id)
	return true
}

func stagingPath(f *FS) string {
	if dir, err := f.stagingDir(); err == nil {
		return dir.Path()
	}
	return "(none)"
}

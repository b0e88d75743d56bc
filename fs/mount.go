package fs

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
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
	// Source is the mount's source in /proc/mounts and df (default "ckptfs").
	Source string
	// VFS are generic mount options: ro, noatime, dev, suid, ... (VFSFlags).
	VFS []string
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
	o.FsName = cmp.Or(opts.Source, "ckptfs")
	o.Name = "ckptfs"
	o.Options = []string{"default_permissions"}
	vfs := opts.VFS
	if opts.ReadOnly {
		vfs = append(vfs[:len(vfs):len(vfs)], "ro")
	}
	root := os.Geteuid() == 0
	flags, err := VFSFlags(vfs, root)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	// The kernel leaves a FUSE file's access time to the daemon: relatime
	// unless the options say otherwise, and a read-only mount writes none.
	switch {
	case flags&(syscall.MS_RDONLY|syscall.MS_NOATIME) != 0:
		f.SetAtimeMode(Noatime)
	case flags&syscall.MS_STRICTATIME != 0:
		f.SetAtimeMode(Strictatime)
	}
	// O_TRUNC comes with the open, so a rewrite's staging file starts
	// empty instead of holding a copy of the content it replaces; and the
	// daemon clears setuid bits itself (killPrivileges), so the kernel does
	// not ask for security.capability before each write.
	o.ExtraCapabilities = fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_HANDLE_KILLPRIV_V2
	exportable(o) // node IDs are inode numbers: file handles (export.go)
	if root {
		// mount(2) takes the generic options as flags (the kernel refuses
		// "noatime" among FUSE's own options), and go-fuse's fallback to
		// fusermount3 would mount without them: so no fallback.
		o.DirectMountStrict, o.DirectMountFlags = true, flags
		if flags == 0 {
			o.DirectMountFlags = syscall.MS_MGC_VAL // 0 means go-fuse's default
		}
	} else {
		o.Options = append(o.Options, vfs...) // fusermount3 parses them
	}
	o.AllowOther = opts.AllowOther
	o.Debug = opts.Debug
	f.releases = &releaseOrder{RawFileSystem: gofs.NewNodeFS(f.Root(), o)}
	server, err := fuse.NewServer(f.releases, mountpoint, &o.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if !opts.ReadOnly {
		f.passthrough.Store(!opts.NoPassthrough && passthroughWorks(server, f))
		logrus.Infof("saves: %s staging files in %s", f.Mode(), stagingPath(f))
	}
	// MaxReadAhead above cannot raise the kernel's 128 KiB; the backing
	// device's setting can, for root.
	if root {
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

// vfsFlags are the generic mount options Mount takes, as the mount(2) flags
// each sets and clears; fusermount3 takes the same names.
var vfsFlags = map[string]struct{ set, clear uintptr }{
	"ro":          {syscall.MS_RDONLY, 0},
	"rw":          {0, syscall.MS_RDONLY},
	"nosuid":      {syscall.MS_NOSUID, 0},
	"suid":        {0, syscall.MS_NOSUID},
	"nodev":       {syscall.MS_NODEV, 0},
	"dev":         {0, syscall.MS_NODEV},
	"noexec":      {syscall.MS_NOEXEC, 0},
	"exec":        {0, syscall.MS_NOEXEC},
	"noatime":     {syscall.MS_NOATIME, syscall.MS_RELATIME | syscall.MS_STRICTATIME},
	"atime":       {0, syscall.MS_NOATIME},
	"relatime":    {syscall.MS_RELATIME, syscall.MS_NOATIME | syscall.MS_STRICTATIME},
	"strictatime": {syscall.MS_STRICTATIME, syscall.MS_NOATIME | syscall.MS_RELATIME},
	"nodiratime":  {syscall.MS_NODIRATIME, 0},
	"diratime":    {0, syscall.MS_NODIRATIME},
}

// IsVFSOption reports whether name is a generic mount option Mount takes.
func IsVFSOption(name string) bool {
	_, ok := vfsFlags[name]
	return ok
}

// VFSFlags returns the mount(2) flags of the generic mount options opts,
// applied in order over the default nosuid,nodev (fusermount3's too). dev
// and suid are for root only: fusermount3 would ignore them for a user,
// and the mount would quietly keep nodev,nosuid.
func VFSFlags(opts []string, root bool) (uintptr, error) {
	var flags uintptr = syscall.MS_NOSUID | syscall.MS_NODEV
	for _, o := range opts {
		f, ok := vfsFlags[o]
		if !ok {
			return 0, fmt.Errorf("unknown mount option %q (generic ones: %s)", o, strings.Join(slices.Sorted(maps.Keys(vfsFlags)), ", "))
		}
		if !root && (o == "dev" || o == "suid") {
			return 0, fmt.Errorf("mount option %q needs root: a user's FUSE mount is always nodev,nosuid", o)
		}
		flags = flags&^f.clear | f.set
	}
	return flags, nil
}

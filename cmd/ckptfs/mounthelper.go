package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/fs"
)

// mount(8) mounts a file system of type T with the helper /sbin/mount.T, if
// there is one: "mount -t fuse.ckptfs -o store=DIR SOURCE MNT", or an fstab
// line of that type, runs
//
//	/sbin/mount.fuse.ckptfs SOURCE MNT [-sfnv] [-N NS] -o OPTIONS
//
// which make install links to this program. Run by that name (or as
// mount.ckptfs, for -t ckptfs), it translates the call into ckptfs mount's
// flags. mount(8) runs helpers without PATH or HOME in their environment.

// helperNames are the names mount(8) runs this program by.
var helperNames = []string{"mount.fuse.ckptfs", "mount.ckptfs"}

// isMountHelper reports whether argv0 names the program as a mount helper.
func isMountHelper(argv0 string) bool {
	return slices.Contains(helperNames, filepath.Base(argv0))
}

// defaultPath is the PATH of a helper that mount(8) gave none: a user's
// mount needs fusermount3.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// helperCall is a mount(8) helper's command line.
type helperCall struct {
	source, mountpoint string
	options            []string // every -o's, split at commas
	fake               bool     // -f: check everything, mount nothing
	verbose            bool     // -v
	sloppy             bool     // -s: ignore options not understood
}

// parseHelperArgs parses "SOURCE MOUNTPOINT [-sfnv] [-N NS] [-o OPTIONS]
// [-t TYPE]", the options anywhere.
func parseHelperArgs(args []string) (helperCall, error) {
	var c helperCall
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if len(a) > 2 { // -oOPTIONS
				return a[2:], nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-o"):
			v, err := value()
			if err != nil {
				return c, err
			}
			c.options = append(c.options, splitOptions(v)...)
		case strings.HasPrefix(a, "-t"):
			v, err := value()
			if err != nil {
				return c, err
			}
			if v != "ckptfs" && v != ckptfsType {
				return c, fmt.Errorf("-t %s: this helper mounts %s only", v, ckptfsType)
			}
		case strings.HasPrefix(a, "-N"):
			return c, errors.New("-N (mount in another namespace) is not supported")
		case len(a) > 1 && a[0] == '-':
			for _, r := range a[1:] {
				switch r {
				case 'f':
					c.fake = true
				case 'v':
					c.verbose = true
				case 's':
					c.sloppy = true
				case 'n': // no /etc/mtab to write: the kernel's table is the only one
				default:
					return c, fmt.Errorf("unknown flag -%c", r)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return c, fmt.Errorf("usage: mount.fuse.ckptfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS] (got %d arguments)", len(pos))
	}
	c.source, c.mountpoint = pos[0], pos[1]
	return c, nil
}

// splitOptions splits a mount(8) option list at its commas, except those
// inside double quotes (mount(8)'s way to give a value with commas), and
// drops the quotes.
func splitOptions(list string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range list {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// fstabOnly tells the options that are mount(8)'s or fstab's business, not
// the file system's (mount(8) passes some of them on): ignored.
func fstabOnly(opt string) bool {
	name, _, _ := strings.Cut(opt, "=")
	switch name {
	case "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
		"nofail", "_netdev", "comment":
		return true
	}
	return strings.HasPrefix(name, "x-")
}

// helperForbidden are mount's flags an option may not set: the helper's
// own business, or one that would leave mount(8) waiting for ever.
var helperForbidden = []string{"foreground", "ready-fd", "options", "source", "help", "version"}

// helperMountArgs translates a helper call into ckptfs mount's arguments.
// flag finds mount's flags by name. Each option is one of: fstab's
// (ignored), a generic one (ro, noatime, nodev, ..., allow_other,
// default_permissions: passed in --options), or a flag of ckptfs mount,
// as name=value or, for a boolean, name alone ('_' for '-' in the name;
// passthrough=false sets --no-passthrough). An absolute SOURCE with no
// store= is the store. ignored lists what -s let through.
//
// mount(8) hands a helper the generic options that set a flag (nodev,
// nosuid, ro, noatime, ...) and drops those that clear one (dev, suid,
// exec): so, as mount.fuse3 does, a mount by root is dev and suid unless
// the options say nodev or nosuid (ckptfs mount's own default is
// nosuid,nodev). A user's mount through mount(8) always gets nosuid,nodev.
func helperMountArgs(c helperCall, root bool, flag func(name string) *pflag.Flag) (args, ignored []string, err error) {
	args = []string{"mount", "--source=" + c.source}
	var generic []string
	hasStore := false
	for _, opt := range c.options {
		name, value, hasValue := strings.Cut(opt, "=")
		switch {
		case fstabOnly(opt):
			continue
		case !hasValue && (fs.IsVFSOption(name) || name == "allow_other" || name == "default_permissions"):
			generic = append(generic, name)
			continue
		}
		key := strings.ReplaceAll(name, "_", "-")
		f := flag(key)
		if f == nil || slices.Contains(helperForbidden, key) {
			if neg := flag("no-" + key); neg != nil && neg.Value.Type() == "bool" {
				v := true
				if hasValue {
					if v, err = strconv.ParseBool(value); err != nil {
						return nil, nil, fmt.Errorf("mount option %s: %q is not true or false", opt, value)
					}
				}
				args = append(args, "--no-"+key+"="+strconv.FormatBool(!v))
				continue
			}
			if c.sloppy {
				ignored = append(ignored, opt)
				continue
			}
			return nil, nil, fmt.Errorf("unknown mount option %q", opt)
		}
		switch {
		case hasValue:
			args = append(args, "--"+key+"="+value)
		case f.Value.Type() == "bool":
			args = append(args, "--"+key)
		default:
			return nil, nil, fmt.Errorf("mount option %s needs a value (%s=...)", name, name)
		}
		hasStore = hasStore || key == "store"
	}
	if !hasStore && filepath.IsAbs(c.source) {
		args = append(args, "--store="+c.source)
		hasStore = true
	}
	if !hasStore && os.Getenv("XDG_DATA_HOME") == "" && os.Getenv("HOME") == "" {
		return nil, nil, errors.New("no store= option, and mount(8) gives its helper no HOME to find the default store under: add store=DIR to the options (or give the store directory as the source)")
	}
	if root && !slices.Contains(generic, "nodev") {
		generic = append([]string{"dev"}, generic...)
	}
	if root && !slices.Contains(generic, "nosuid") {
		generic = append([]string{"suid"}, generic...)
	}
	if len(generic) > 0 {
		args = append(args, "--options="+strings.Join(generic, ","))
	}
	return append(args, "--", c.mountpoint), ignored, nil
}

// parseMountOptions splits ckptfs mount's -o list: allow_other sets
// *allowOther, default_permissions is always on, and the generic options
// are returned for fs.Mount, checked (dev and suid are root's only).
func parseMountOptions(list string, root bool, allowOther *bool) ([]string, error) {
	var vfs []string
	for _, o := range splitOptions(list) {
		switch o {
		case "allow_other":
			*allowOther = true
		case "default_permissions":
		default:
			vfs = append(vfs, o)
		}
	}
	if _, err := fs.VFSFlags(vfs, root); err != nil {
		return nil, fmt.Errorf("-o: %w", err)
	}
	return vfs, nil
}

// setUpMountHelper readies root to run as mount(8)'s helper with the
// helper's arguments: it runs ckptfs mount with their translation,
// quietly unless -v. done is true when nothing is left to run (-f).
func setUpMountHelper(root *cobra.Command, helperArgs []string, stderr io.Writer) (done bool, err error) {
	c, err := parseHelperArgs(helperArgs)
	if err != nil {
		return false, err
	}
	if os.Getenv("PATH") == "" {
		os.Setenv("PATH", defaultPath)
	}
	mountCmd, _, err := root.Find([]string{"mount"})
	if err != nil {
		return false, err
	}
	flag := func(name string) *pflag.Flag {
		if f := mountCmd.Flags().Lookup(name); f != nil {
			return f
		}
		return root.PersistentFlags().Lookup(name)
	}
	if slices.Contains(c.options, "remount") {
		if c.fake {
			_, err := remountFlags(c)
			return true, err
		}
		return true, helperRemount(c, os.Geteuid() == 0)
	}
	args, ignored, err := helperMountArgs(c, os.Geteuid() == 0, flag)
	if err != nil {
		return false, err
	}
	for _, o := range ignored {
		fmt.Fprintf(stderr, "ckptfs: ignoring unknown mount option %q (-s)\n", o)
	}
	if c.verbose {
		fmt.Fprintf(stderr, "ckptfs %s\n", strings.Join(args, " "))
	} else {
		root.SetOut(io.Discard) // mount(8)'s helpers say nothing when all is well
	}
	if c.fake {
		// Everything is checked that can be without mounting: the flags
		// and the generic options.
		if err := mountCmd.ParseFlags(args[1:]); err != nil {
			return false, err
		}
		var allow bool
		opts, _ := mountCmd.Flags().GetString("options")
		_, err := parseMountOptions(opts, os.Geteuid() == 0, &allow)
		return true, err
	}
	root.SetArgs(args)
	return false, nil
}

// remountFlags are the mount(2) flags of a remount's generic options (ro,
// rw, noatime, ...), with the helper's default for root: dev and suid
// unless nodev or nosuid. ckptfs's own options (store=, codec=, ...) are
// the running daemon's and cannot change: they are ignored.
func remountFlags(c helperCall) (uintptr, error) {
	var generic []string
	for _, opt := range c.options {
		if opt != "remount" && !fstabOnly(opt) && fs.IsVFSOption(opt) {
			generic = append(generic, opt)
		}
	}
	if !slices.Contains(generic, "nodev") {
		generic = append([]string{"dev"}, generic...)
	}
	if !slices.Contains(generic, "nosuid") {
		generic = append([]string{"suid"}, generic...)
	}
	return fs.VFSFlags(generic, true)
}

// helperRemount is mount -o remount,...: the kernel changes the mount's
// generic flags (ro, noatime, ...) itself; the daemon keeps serving. Root
// only, as a user's mount(8) does not remount FUSE mounts.
func helperRemount(c helperCall, root bool) error {
	if !root {
		return errors.New("remount needs root")
	}
	flags, err := remountFlags(c)
	if err != nil {
		return err
	}
	if err := syscall.Mount(c.source, c.mountpoint, "", flags|syscall.MS_REMOUNT, ""); err != nil {
		return fmt.Errorf("remount %s: %w", c.mountpoint, err)
	}
	return nil
}

package fs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// infoPrefix names the read-only attributes that describe how a file is
// stored; they are computed, never stored.
const infoPrefix = "user.ckptfs."

var (
	_ gofs.NodeGetxattrer    = (*Node)(nil)
	_ gofs.NodeSetxattrer    = (*Node)(nil)
	_ gofs.NodeRemovexattrer = (*Node)(nil)
	_ gofs.NodeListxattrer   = (*Node)(nil)
)

// aclPrefix names the POSIX ACL attributes. ckptfs does not implement ACLs:
// storing them as plain attributes would let an ACL that denies a user go
// unenforced, and tools that copy modes as ACLs (cp -a, cp -p) would leave
// the mode bits wrong. EOPNOTSUPP, as from a filesystem mounted noacl,
// makes those tools fall back to chmod.
const aclPrefix = "system.posix_acl_"

// infoNames are the computed attributes' names after infoPrefix (the
// Python package's file_info reads the same list: python/ckptfs).
var infoNames = []string{"stored_bytes", "codec", "reference", "chain_depth", "version",
	"family", "format", "ingest", "ref_reason", "ref_path", "pages", "fidelity"}

// infoXattrs computes the user.ckptfs.* attributes of a regular file.
func (n *Node) infoXattrs() map[string]string {
	n.waitClosedCommit()
	info, err := n.fsys.store.Info(n.ino)
	if err != nil || info == nil {
		return nil
	}
	var pages []string
	for _, e := range info.Pack {
		pages = append(pages, fmt.Sprintf("%d+%d", e.Start, e.Len))
	}
	return map[string]string{
		infoPrefix + "pages":        strings.Join(pages, ","),
		infoPrefix + "stored_bytes": strconv.FormatInt(info.StoredBytes, 10),
		infoPrefix + "codec":        info.Codec,
		infoPrefix + "reference":    strconv.FormatUint(uint64(info.Reference), 10),
		infoPrefix + "chain_depth":  strconv.FormatUint(uint64(info.Depth), 10),
		infoPrefix + "version":      strconv.FormatUint(uint64(info.Version), 10),
		infoPrefix + "family":       info.Family,
		infoPrefix + "format":       info.Format,
		infoPrefix + "ingest":       info.Ingest,
		infoPrefix + "ref_reason":   info.RefReason,
		infoPrefix + "ref_path":     info.RefPath,
		infoPrefix + "fidelity":     info.Fidelity,
	}
}

// Getxattr reads an attribute; ERANGE with the size if dest is too small.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if strings.HasPrefix(attr, aclPrefix) {
		return 0, syscall.EOPNOTSUPP
	}
	var v []byte
	if strings.HasPrefix(attr, infoPrefix) {
		s, ok := n.infoXattrs()[attr]
		if !ok {
			return 0, syscall.ENODATA
		}
		v = []byte(s)
	} else {
		var ok bool
		if v, ok = n.fsys.names.Xattr(n.ino, attr); !ok {
			return 0, syscall.ENODATA
		}
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr stores an attribute; the computed ones are read-only.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if strings.HasPrefix(attr, aclPrefix) {
		return syscall.EOPNOTSUPP
	}
	if strings.HasPrefix(attr, infoPrefix) {
		return syscall.EPERM
	}
	_, exists := n.fsys.names.Xattr(n.ino, attr)
	switch {
	case flags&xattrCreate != 0 && exists:
		return syscall.EEXIST
	case flags&xattrReplace != 0 && !exists:
		return syscall.ENODATA
	}
	return toErrno(n.fsys.names.SetXattr(n.ino, attr, data))
}

// Linux setxattr(2) flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

// Removexattr deletes an attribute.
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if strings.HasPrefix(attr, aclPrefix) {
		return syscall.EOPNOTSUPP
	}
	if strings.HasPrefix(attr, infoPrefix) {
		return syscall.EPERM
	}
	return toErrno(n.fsys.names.RemoveXattr(n.ino, attr))
}

// Listxattr lists the stored attributes, NUL-terminated.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var buf []byte
	for _, name := range n.fsys.names.ListXattr(n.ino) {
		if strings.HasPrefix(name, aclPrefix) {
			continue // stored by an earlier version, not in force
		}
		buf = append(append(buf, name...), 0)
	}
	// The computed user.ckptfs.* attributes are read by name only, as
	// CephFS serves its ceph.* ones: listed, they were copied out with the
	// file by cp -a, rsync -X and tar --xattrs (describing a store the copy
	// is not in), rsync -X into the mount failed removing them (EPERM), and
	// each listing of a file just closed waited for its commit.
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}

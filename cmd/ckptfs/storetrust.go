package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/ckptfs/ckptfs/chain/medium"
)

// checkStoreTrusted refuses a store directory that someone else could have
// prepared or could change under the daemon: one not owned by the mounting
// user, one writable by group or others, or one whose files are symlinks or
// not regular files (followed, they would make the daemon write wherever
// they point, with its rights). A missing directory is fine: mount creates
// it 0700. The store's files are also opened with O_NOFOLLOW, so a symlink
// planted after this check is refused too.
func checkStoreTrusted(store string) error {
	fi, err := os.Stat(store)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("store %s: %w", store, err)
	case !fi.IsDir():
		return fmt.Errorf("store %s is not a directory", store)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("store %s: no owner information", store)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("store %s belongs to %s, not to you (%s): a store another user controls is not trusted; "+
			"use a store directory of your own (--store), or have this one chowned to you", store, userName(st.Uid), userName(uint32(uid)))
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("store %s is writable by its group or by others (mode %04o), who could replace its files; "+
			"make it private (chmod 700 %s) or use another --store", store, perm, store)
	}
	for _, name := range medium.Files {
		p := filepath.Join(store, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store file %s: %w", p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("store file %s is a symbolic link, which ckptfs does not follow: remove it (a store's files are its own)", p)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("store file %s is not a regular file (%v): remove it", p, fi.Mode().Type())
		}
	}
	return nil
}

// userName is "name (uid N)", or "uid N" for an unknown user.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}

// openNoFollow opens a store file without following a symlink.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
}

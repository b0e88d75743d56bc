package namespace

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/ckptfs/ckptfs/meta"
)

// No record links an inode to its names, so a path is found by scanning
// the directory entries once into an index of each inode's first entry.
// Not for hot paths.

// link is an inode's entry: the directory that holds it, and its name.
type link struct {
	parent meta.Ino
	name   string
}

// linksOf indexes every named inode's first directory entry in key order
// (one of them, for hard links).
func linksOf(mtx *meta.Tx) (map[meta.Ino]link, error) {
	up := map[meta.Ino]link{}
	err := mtx.ForEachDirent(func(parent meta.Ino, name string, child meta.Ino) error {
		if _, ok := up[child]; !ok {
			up[child] = link{parent, name}
		}
		return nil
	})
	return up, err
}

// PathOf returns a path of inode ino below the root ("dir/name"), for an
// inode found with no name at hand (a save recovered after a crash).
func (ns *Namespace) PathOf(ino meta.Ino) (string, error) {
	var p string
	err := ns.view(func(tx *txn) error {
		up, err := linksOf(tx.mtx)
		if err != nil {
			return err
		}
		var parts []string
		for at, seen := ino, 0; at != meta.RootIno; seen++ {
			l, ok := up[at]
			if !ok || seen > len(up) {
				return fmt.Errorf("path of inode %d: %w", ino, syscall.ENOENT)
			}
			parts = append(parts, l.name)
			at = l.parent
		}
		slices.Reverse(parts)
		p = strings.Join(parts, "/")
		return nil
	})
	return p, err
}

// Paths maps every inode with a name to a path below the root (the root
// itself to ""). A name whose directory chain does not reach the root
// shows under "(unlinked)".
func Paths(mtx *meta.Tx) (map[meta.Ino]string, error) {
	up, err := linksOf(mtx)
	if err != nil {
		return nil, err
	}
	paths := map[meta.Ino]string{meta.RootIno: ""}
	var resolve func(ino meta.Ino, depth int) string
	resolve = func(ino meta.Ino, depth int) string {
		if p, ok := paths[ino]; ok {
			return p
		}
		l, ok := up[ino]
		if !ok || depth > 4096 {
			return "(unlinked)"
		}
		p := path.Join(resolve(l.parent, depth+1), l.name)
		paths[ino] = p
		return p
	}
	for ino := range up {
		resolve(ino, 0)
	}
	return paths, nil
}

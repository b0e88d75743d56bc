package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/nandsim"
)

// policyFlags are the coding flags that mount and replay share: one per
// setting of the policy table (policy.Settings), so that a new setting gets
// its flag without a change here.
type policyFlags struct {
	flags *pflag.FlagSet
	texts map[string]func() string // each setting's flag value, by key
}

func (p *policyFlags) register(fl *pflag.FlagSet) {
	p.flags, p.texts = fl, map[string]func() string{}
	for _, s := range policy.Settings() {
		if s.Number {
			// An int flag, as --max-depth always was: its help reads
			// "--max-depth int", and pflag refuses a value that is not one.
			def, err := strconv.Atoi(s.Default())
			if err != nil {
				panic(fmt.Sprintf("policy setting %s: default %q is not a number", s.Key, s.Default()))
			}
			v := fl.Int(s.Flag, def, s.Usage)
			p.texts[s.Key] = func() string { return strconv.Itoa(*v) }
			continue
		}
		v := fl.String(s.Flag, s.Default(), s.Usage)
		p.texts[s.Key] = func() string { return *v }
	}
}

// policy is the policy the flags say: each setting's flag, given or not.
func (p *policyFlags) policy() (policy.Policy, error) {
	pol := policy.Default()
	for _, s := range policy.Settings() {
		if err := s.Parse(&pol, p.texts[s.Key]()); err != nil {
			return pol, fmt.Errorf("--%s: %w", s.Flag, err)
		}
	}
	return pol, pol.Validate()
}

// given lists the keys of the settings whose flags were given: those a
// mount sets, while the others keep the store's values.
func (p *policyFlags) given() []string {
	var keys []string
	for _, s := range policy.Settings() {
		if p.flags.Changed(s.Flag) {
			keys = append(keys, s.Key)
		}
	}
	return keys
}

// codingFlagList names the coding flags, for the help of mount.
func codingFlagList() string {
	var names []string
	for _, s := range policy.Settings() {
		names = append(names, "--"+s.Flag)
	}
	return strings.Join(names, ", ")
}

// newStoreDevice is the device of a new store in dir and where its size
// came from: --device-size when given, else as much as the filesystem
// under dir has free (medium.HostSizedDevice).
func newStoreDevice(size, dir string) (nandsim.Config, string, error) {
	if size == "" {
		return medium.HostSizedDevice(dir)
	}
	cfg, err := deviceForSize(size)
	if err != nil {
		return cfg, "", err
	}
	if size == "paper" {
		return cfg, medium.PaperDeviceSource, nil
	}
	return cfg, "--device-size " + size, nil
}

// deviceForSize returns the store's device (the paper's Table 4 device)
// with as many blocks per chip as make size bytes of physical flash; ""
// and "paper" are the paper's 32 GiB device.
func deviceForSize(size string) (nandsim.Config, error) {
	cfg := medium.StoreDevice()
	if size == "" || size == "paper" {
		return cfg, nil
	}
	bytes, err := parseSize(size)
	if err != nil {
		return cfg, fmt.Errorf("--device-size: %w", err)
	}
	if cfg, err = nandsim.ConfigForSize(cfg, bytes); err != nil {
		return cfg, fmt.Errorf("--device-size %s: %w", size, err)
	}
	return cfg, nil
}

// parseSize reads "64MiB", "32GiB", "1.5GB", "4096".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("size %q: want a positive number with an optional unit (KiB, MiB, GiB, ...)", s)
			}
			return int64(v * u.mult), nil
		}
	}
	return 0, fmt.Errorf("size %q not understood", s)
}

// defaultStoreDir is where a mount point's store lives unless --store says
// otherwise: under the user's data directory, named after the mount point's
// absolute path, so remounting the same directory finds the same store.
//
// The name is a readable tail of the path ('/' written '%') and a hash of
// the whole absolute path: two mount points never share a store (the
// readable part may coincide, as for .../a%b and .../a/b, the hash does not)
// and the name stays short however long the path is.
func defaultStoreDir(mountpoint string) (string, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", err
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --store given and no home directory: %w", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	stores := filepath.Join(base, "ckptfs", "stores")
	store := filepath.Join(stores, storeName(abs))
	if _, err := os.Lstat(store); err == nil {
		return store, nil
	}
	// Stores made before the hashed names were named by the path alone
	// ('/' replaced by '%'): an existing one is still this mount point's
	// store and is kept, unless another daemon holds it (it then belongs
	// to the other mount point whose path has the same legacy name, such
	// as .../a%b for .../a/b) or this mount point has a store of the new
	// name. Only such legacy names can be shared.
	if legacy := legacyStoreName(abs); len(legacy) <= 255 {
		old := filepath.Join(stores, legacy)
		if fi, err := os.Lstat(old); err == nil && fi.IsDir() && !storeLocked(old) {
			return old, nil
		}
	}
	return store, nil
}

// storeNameTail bounds the readable part of a store name, in bytes.
const storeNameTail = 64

// storeName is the default store's name for the absolute mount point abs.
func storeName(abs string) string {
	sum := sha256.Sum256([]byte(abs))
	readable := strings.ReplaceAll(strings.Trim(abs, "/"), "/", "%")
	if readable == "" {
		readable = "root"
	}
	if len(readable) > storeNameTail {
		cut := len(readable) - storeNameTail
		for cut < len(readable) && !utf8.RuneStart(readable[cut]) {
			cut++
		}
		readable = readable[cut:]
	}
	return readable + "-" + hex.EncodeToString(sum[:8])
}

// legacyStoreName is the name stores had before storeName: the path with
// '/' replaced by '%', which two paths can share.
func legacyStoreName(abs string) string {
	name := strings.ReplaceAll(strings.Trim(abs, "/"), "/", "%")
	if name == "" {
		name = "root"
	}
	return name
}

// requireStore refuses a directory that is not a ckptfs store (no meta.db),
// so that the commands that read a store never create one where a path was
// mistyped.
func requireStore(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("store %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("store %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("store %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, medium.MetaFile)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s is not a ckptfs store (it has no %s): give the --store directory of a mount", dir, medium.MetaFile)
	} else if err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	return nil
}

// openExistingStore opens a store that must already exist, with the policy
// it was last mounted with: what stats, fsck and report read.
// openUnmountedStore is openExistingStore for an offline command: a store
// a daemon holds is refused with hint, what to do instead.
func openUnmountedStore(dir, hint string) (*storedir.Dir, error) {
	ds, err := openExistingStore(dir)
	if errors.Is(err, chain.ErrLocked) {
		return nil, fmt.Errorf("%w: it is mounted; %s", err, hint)
	}
	return ds, err
}

func openExistingStore(dir string) (*storedir.Dir, error) {
	if err := requireStore(dir); err != nil {
		return nil, err
	}
	if err := remote.CheckNotReplica(dir); err != nil {
		return nil, err
	}
	return storedir.Open(dir, storedir.Options{Options: chain.Options{Policy: policy.Default()}, StoredPolicy: true})
}

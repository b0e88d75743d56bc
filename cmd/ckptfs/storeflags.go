package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/spf13/pflag"
)

// policyFlags are the coding flags that mount and replay share.
type policyFlags struct {
	codec, scheme, snapDis string
	maxDepth               int
}

func (p *policyFlags) register(fs *pflag.FlagSet) {
	d := chain.DefaultPolicy()
	fs.StringVar(&p.codec, "codec", d.Codec.String(), "tensor codec: "+codecNames())
	fs.StringVar(&p.scheme, "scheme", d.Scheme.String(), "delta scheme: progressive (against the previous version) or chain (against the baseline)")
	fs.StringVar(&p.snapDis, "snap-dis", chain.FormatSnapDis(d.SnapDis), "versions per baseline group (1 = all baselines), or auto")
	fs.IntVar(&p.maxDepth, "max-depth", d.MaxDepth, "with --snap-dis auto: most deltas between a version and its baseline")
}

func (p *policyFlags) policy() (chain.Policy, error) {
	var pol chain.Policy
	var err error
	if pol.Codec, err = encode.ParseCodec(p.codec); err != nil {
		return pol, fmt.Errorf("--codec: %w", err)
	}
	if pol.Scheme, err = chain.ParseScheme(p.scheme); err != nil {
		return pol, fmt.Errorf("--scheme: %w", err)
	}
	if pol.SnapDis, err = chain.ParseSnapDis(p.snapDis); err != nil {
		return pol, fmt.Errorf("--snap-dis: %w", err)
	}
	pol.MaxDepth = p.maxDepth
	return pol, pol.Validate()
}

func codecNames() string {
	var names []string
	for _, c := range encode.Codecs() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// defaultStoreDir is where a mount point's store lives unless --store says
// otherwise: under the user's data directory, named after the mount point's
// absolute path, so remounting the same directory finds the same store.
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
	name := strings.ReplaceAll(strings.Trim(abs, "/"), "/", "%")
	if name == "" {
		name = "root"
	}
	return filepath.Join(base, "ckptfs", "stores", name), nil
}

package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// release is the number of the ckptfs release this source is, or leads
// to. A build of the commit tagged v<release> is that release; any other
// build is the release with the build's identity as a PEP 440 local label
// (0.1.0+3bb5d46.dirty), so that the Python wheel (make wheel) takes the
// same version as ckptfs version prints.
const release = "0.1.0"

// version is set at build time with -ldflags "-X main.version=..." (make
// build stamps git describe); without it, buildIdentity falls back to the
// module's build information.
var version string

// versionString is the version ckptfs version prints, valid under PEP 440.
func versionString() string {
	id := buildIdentity()
	if id == "v"+release || id == release {
		return release
	}
	return release + "+" + localLabel(id)
}

// buildIdentity is the version stamped at build time, else the module
// version go install recorded, else the VCS revision go build recorded,
// else "devel".
func buildIdentity() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		return "devel-" + rev[:min(12, len(rev))] + dirty
	}
	return "devel"
}

// localLabel turns a build identity (git describe: v0.1.0-4-gabcdef-dirty)
// into a PEP 440 local version label: lower-case letters and digits in
// dot-separated parts (v0.1.0.4.gabcdef.dirty).
func localLabel(id string) string {
	parts := strings.FieldsFunc(strings.ToLower(id), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	})
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ".")
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of ckptfs",
		Long: `version prints the release number, followed for a build of any commit other
than the release's tag by the build's identity (git describe) as a PEP 440
local label: 0.1.0+3bb5d46.dirty. The Python wheel has the same version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "ckptfs %s\n", versionString())
			return err
		},
	}
}

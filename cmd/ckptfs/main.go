// Command ckptfs is a FUSE filesystem for neural-network checkpoints that stores
// each checkpoint as a delta against an earlier one, on a simulated NAND SSD that
// counts the wear it saves. Each subcommand lives in a file of its own; this file
// holds only the root command and the flags every subcommand shares.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCommand() *cobra.Command {
	var logLevel, memLimit string
	root := &cobra.Command{
		Use:   "ckptfs",
		Short: "A checkpoint filesystem that stores training checkpoints as float deltas",
		Long: `ckptfs stores neural-network checkpoints (PyTorch, Caffe, NumPy, safetensors)
as baseline-plus-delta chains on a simulated NAND SSD, and reports how much
write volume and flash wear that saves compared with a plain filesystem.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			level, err := logrus.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logrus.SetLevel(level)
			logrus.SetOutput(os.Stderr)
			// A soft heap limit makes the collector work before garbage
			// doubles the live set (the simulators' maps and the chunk
			// cache), so memory stays bounded whatever the file size.
			if os.Getenv("GOMEMLIMIT") == "" && memLimit != "" {
				n, err := parseSize(memLimit)
				if err != nil {
					return fmt.Errorf("--memory-limit: %w", err)
				}
				debug.SetMemoryLimit(n)
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warning",
		"log verbosity: panic, fatal, error, warning, info, debug or trace")
	root.PersistentFlags().StringVar(&memLimit, "memory-limit", "256MiB",
		"soft limit for the Go heap (GOMEMLIMIT overrides it); the 32 GiB simulated SSD and its shadow alone take about 130 MB")
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands holds one constructor per subcommand; each subcommand's file
// appends its own in an init function, so adding a command touches one file.
var subcommands []func() *cobra.Command

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ckptfs:", err)
		os.Exit(1)
	}
}

// Command ckptfs is a FUSE filesystem for neural-network checkpoints that stores
// each checkpoint as a delta against an earlier one, on a simulated NAND SSD that
// counts the wear it saves. Each subcommand lives in a file of its own; this file
// holds only the root command and the flags every subcommand shares.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/chain/storedir"
)

func newRootCommand() *cobra.Command {
	var logLevel, memLimit string
	root := &cobra.Command{
		Use:   "ckptfs",
		Short: "A checkpoint filesystem that stores training checkpoints as float deltas",
		Long: `ckptfs stores neural-network checkpoints (PyTorch, Caffe, NumPy, safetensors)
as baseline-plus-delta chains on a simulated NAND SSD, and reports how much
write volume and flash wear that saves compared with a plain filesystem.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			level, err := logrus.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logrus.SetLevel(level)
			logrus.SetOutput(os.Stderr)
			return setMemoryLimit(memLimit, 0)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warning",
		"log verbosity: panic, fatal, error, warning, info, debug or trace")
	root.PersistentFlags().StringVar(&memLimit, "memory-limit", "auto",
		"soft limit for the Go heap, or auto: what the open store may hold (its two simulated SSDs' maps, about 8 bytes per 4 KiB of flash each, the chunk cache, the encoders' and commits' buffers) and a quarter more; GOMEMLIMIT overrides it")
	memLimitFlag = &memLimit
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	root.AddCommand(newVersionCommand())
	return root
}

// memLimitFlag is the --memory-limit value, for commands that open a store.
var memLimitFlag *string

// setMemoryLimit applies --memory-limit. A soft heap limit makes the
// collector work before garbage doubles the live set (the simulators' maps
// and the chunk cache dominate it), so memory stays bounded whatever the file
// size; too low a limit makes the collector run without end, so "auto"
// follows what the store holds (need, 0 before a store is open; at least
// 160 MiB), and a quarter more (at least 64 MiB) for garbage between
// collections.
func setMemoryLimit(value string, need int64) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	if value != "auto" {
		n, err := parseSize(value)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(n)
		return nil
	}
	debug.SetMemoryLimit(autoMemoryLimit(need))
	return nil
}

// autoMemoryLimit is --memory-limit auto for a store that holds need bytes.
func autoMemoryLimit(need int64) int64 {
	need = max(need, 160<<20)
	return need + max(need/4, 64<<20)
}

// limitMemoryFor applies an automatic --memory-limit for an open store:
// what its bounded parts may hold, and a quarter more (at least 64 MiB)
// for garbage between collections (autoMemoryLimit). A limit at what they
// hold would make the collector run without end once they fill (measured:
// 55% of the daemon's CPU in the runtime during 1 GB saves).
func limitMemoryFor(ds *storedir.Dir, _ int64) {
	limitMemoryTo(ds.MemoryNeeded() + ds.Store.MemoryBudget())
}

// limitMemoryTo applies an automatic --memory-limit for what an open
// store may hold (need bytes), as limitMemoryFor does; a replica, which has
// no simulated SSDs, holds its store's budget alone.
func limitMemoryTo(need int64) {
	if memLimitFlag != nil {
		_ = setMemoryLimit(*memLimitFlag, need)
	}
}

// subcommands holds one constructor per subcommand; each subcommand's file
// appends its own in an init function, so adding a command touches one file.
var subcommands []func() *cobra.Command

func main() {
	root := newRootCommand()
	if isMountHelper(os.Args[0]) {
		done, err := setUpMountHelper(root, os.Args[1:], os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ckptfs:", err)
			os.Exit(exitFailure)
		}
		if done {
			return
		}
	}
	if err := root.Execute(); err != nil {
		var reported errReported
		if !errors.As(err, &reported) {
			fmt.Fprintln(os.Stderr, "ckptfs:", err)
		}
		os.Exit(exitCode(err))
	}
}

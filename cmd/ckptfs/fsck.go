package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newFsckCommand) }

func newFsckCommand() *cobra.Command {
	var store string
	var deep, asJSON bool
	cmd := &cobra.Command{
		Use:   "fsck --store DIR",
		Short: "Check a store's metadata, chains, reference counts and free space",
		Long: `fsck checks an unmounted store on its own terms: link counts recounted from
the directory entries, every delta's reference present, every version's chunks
tiling it, every device page free or owned by exactly one version (no leaks, no
overlaps). --deep also rebuilds every file and verifies its checksum.
It exits with status 1 if it finds problems.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return errors.New("--store is required")
			}
			ds, err := openUnmountedStore(store, "unmount it first")
			if err != nil {
				return err
			}
			defer ds.Close()
			rep, err := ds.Check(deep)
			if err != nil {
				return err
			}
			if rep.Problems == nil {
				rep.Problems = []chain.Problem{} // "problems": [] rather than null
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "checked %d inodes, %d versions, %d chunks", rep.Inodes, rep.Versions, rep.Chunks)
				if deep {
					fmt.Fprintf(out, ", rebuilt %d files", rep.Verified)
				}
				fmt.Fprintln(out)
				for _, p := range rep.Problems {
					fmt.Fprintln(out, "PROBLEM", p)
				}
				if len(rep.Problems) == 0 {
					fmt.Fprintln(out, "clean")
				}
			}
			if len(rep.Problems) > 0 {
				return fmt.Errorf("%d problems found", len(rep.Problems))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "store directory to check (not mounted)")
	cmd.Flags().BoolVar(&deep, "deep", false, "rebuild every file and verify its checksum")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

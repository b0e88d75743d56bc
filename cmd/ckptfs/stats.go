package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

func init() { subcommands = append(subcommands, newStatsCommand) }

func newStatsCommand() *cobra.Command {
	var store string
	var asJSON, files bool
	cmd := &cobra.Command{
		Use:   "stats [--json] MOUNTPOINT | --store DIR",
		Short: "Show what a store saved: write volume and erases against a plain filesystem",
		Long: `stats prints the store's report: host pages written, GC copies, erases and WAF of
the simulated SSD beside the shadow device (what a plain filesystem would have
written for the same operations), the written_volume_ratio and erase_ratio,
lifetime projections, and rows per checkpoint family and per file.
Give a mount point (it reads MOUNTPOINT/.ckptfs/stats.json from the running
daemon) or --store for an unmounted store.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep *storedir.Report
			var rs *remote.Stats
			switch {
			case len(args) == 1 && store != "":
				return errors.New("give a mount point or --store, not both")
			case len(args) == 1:
				b, err := os.ReadFile(filepath.Join(args[0], ".ckptfs", "stats.json"))
				if err != nil {
					return fmt.Errorf("%s is not a mounted ckptfs (%w)", args[0], err)
				}
				var replica struct {
					ReadOnly bool `json:"read_only"`
					remote.ReplicaStats
				}
				if json.Unmarshal(b, &replica) == nil && replica.ReadOnly {
					if asJSON {
						_, err := cmd.OutOrStdout().Write(b)
						return err
					}
					printReplica(cmd.OutOrStdout(), &replica.ReplicaStats)
					return nil
				}
				rep = new(storedir.Report)
				if err := json.Unmarshal(b, rep); err != nil {
					return fmt.Errorf("stats.json: %w", err)
				}
				var extra struct {
					Remote *remote.Stats `json:"remote"`
				}
				_ = json.Unmarshal(b, &extra)
				rs = extra.Remote
			case store != "":
				ds, err := openUnmountedStore(store, "run ckptfs stats MOUNTPOINT")
				if err != nil {
					return err
				}
				defer ds.Close()
				if rep, err = ds.Report(storedir.ReportOptions{}); err != nil {
					return err
				}
				if rs, err = remote.StoredStats(store); err != nil {
					return err
				}
			default:
				return errors.New("give a mount point or --store DIR")
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(withRemoteStats(rep, rs))
			}
			printReport(cmd.OutOrStdout(), rep, files)
			if rs != nil {
				printRemote(cmd.OutOrStdout(), rs)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "read an unmounted store directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON with the metric names of docs/ARCHITECTURE.md as keys")
	cmd.Flags().BoolVar(&files, "files", false, "also list every file")
	return cmd
}

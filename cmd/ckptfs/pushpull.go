package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

func init() { subcommands = append(subcommands, newPushCommand, newPullCommand) }

// interruptible is a context that ends on SIGINT or SIGTERM.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newPushCommand() *cobra.Command {
	var store string
	var r remoteFlags
	cmd := &cobra.Command{
		Use:   "push --store DIR s3://BUCKET/PREFIX",
		Short: "Copy an unmounted store to an S3 bucket (what a --remote mount does in the background)",
		Long: `push uploads every version of the store that the bucket lacks (chunks as
they are stored: delta-coded and compressed), then a root naming them and the
tree of names, then deletes what no kept root needs. It resumes where an
interrupted push or a --remote mount stopped. Credentials come from the AWS
environment variables and config files; --endpoint names a non-AWS server.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return errors.New("--store is required")
			}
			r.url = args[0]
			if err := r.check(); err != nil {
				return err
			}
			ds, err := openUnmountedStore(store, "mount it with --remote instead")
			if err != nil {
				return err
			}
			defer ds.Close()
			b, err := r.open(true, true)
			if err != nil {
				return err
			}
			o, err := r.options()
			if err != nil {
				return err
			}
			u, err := remote.NewUploader(ds.Store, ds.Dir, b, o)
			if err != nil {
				return err
			}
			ctx, cancel := interruptible()
			defer cancel()
			start := time.Now()
			err = u.Push(ctx)
			st := u.Stats()
			if cerr := u.Close(0); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("push to %s: %w", b, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "pushed to %s in %.1fs\n", b, time.Since(start).Seconds())
			return printJSON(cmd, st)
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "store directory (not mounted)")
	r.registerClient(cmd.Flags())
	r.registerUpload(cmd.Flags())
	return cmd
}

func newPullCommand() *cobra.Command {
	var store string
	var r remoteFlags
	cmd := &cobra.Command{
		Use:   "pull --store DIR s3://BUCKET/PREFIX",
		Short: "Copy the newest checkpoint of an S3 bucket into a new local store",
		Long: `pull copies the bucket's newest root into a new store (DIR must not hold one):
every object is checked against its SHA-256, every version keeps its deltas,
and every file is read back once at the end, which verifies each chunk's and
each file's checksum. The store is then an ordinary one: mount it, and saves
continue its chains.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return errors.New("--store is required")
			}
			r.url = args[0]
			if err := r.check(); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(store, medium.MetaFile)); err == nil {
				return fmt.Errorf("store %s exists: pull copies into a new store", store)
			}
			b, err := r.open(true, false)
			if err != nil {
				return err
			}
			created, err := missingDirs(store)
			if err != nil {
				return err
			}
			dev, devSource, err := medium.HostSizedDevice(store)
			if err != nil {
				return err
			}
			ds, err := storedir.Open(store, storedir.Options{Options: chain.Options{Policy: policy.Default()},
				Media: medium.Options{Device: dev, DeviceSource: devSource}})
			if err != nil {
				return err
			}
			ctx, cancel := interruptible()
			defer cancel()
			start := time.Now()
			st, err := remote.Pull(ctx, b, ds.Store)
			if cerr := ds.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				removeNewStore(store, created)
				return fmt.Errorf("pull from %s: %w", b, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "pulled %s root %d into %s in %.1fs\n", b, st.Root, store, time.Since(start).Seconds())
			return printJSON(cmd, st)
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "store directory to create")
	r.registerClient(cmd.Flags())
	return cmd
}

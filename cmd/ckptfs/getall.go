package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newGetAllCommand) }

// newGetAllCommand is the baseline a restore from a bucket is measured
// against: every object under a prefix read whole with plain GETs, as a
// copy tool would, so many at a time.
func newGetAllCommand() *cobra.Command {
	var r remoteFlags
	var parallel int
	cmd := &cobra.Command{
		Use:    "get-all s3://BUCKET/PREFIX",
		Short:  "Read every object under a prefix with plain GETs and print the throughput (a restore's baseline)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r.url = args[0]
			if err := r.check(); err != nil {
				return err
			}
			if parallel < 1 {
				return errors.New("--parallel must be at least 1")
			}
			b, err := r.open(true, false)
			if err != nil {
				return err
			}
			ctx, cancel := interruptible()
			defer cancel()
			start := time.Now()
			keys, err := b.List(ctx, "")
			if err != nil {
				return err
			}
			var total atomic.Int64
			var wg sync.WaitGroup
			var once sync.Once
			var firstErr error
			next := make(chan string)
			for i := 0; i < parallel; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range next {
						data, err := b.Get(ctx, k)
						if err != nil {
							once.Do(func() { firstErr = err; cancel() })
							continue
						}
						total.Add(int64(len(data)))
					}
				}()
			}
			for _, k := range keys {
				if ctx.Err() != nil {
					break
				}
				next <- k
			}
			close(next)
			wg.Wait()
			if firstErr != nil {
				return fmt.Errorf("get-all %s: %w", b, firstErr)
			}
			if errors.Is(ctx.Err(), context.Canceled) && firstErr == nil && total.Load() == 0 && len(keys) > 0 {
				return ctx.Err()
			}
			secs := time.Since(start).Seconds()
			return printJSON(cmd, map[string]any{"objects": len(keys), "bytes": total.Load(), "seconds": secs,
				"mb_per_second": float64(total.Load()) / 1e6 / secs})
		},
	}
	cmd.Flags().IntVar(&parallel, "parallel", 8, "GETs in flight")
	r.registerClient(cmd.Flags())
	return cmd
}
